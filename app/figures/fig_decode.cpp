// Preset "decode": one layer and query head of a decode trace. Above, every step's attention
// (steps down, stream positions across) where the cache held the entry, evicted entries grey and
// the future blank, with the chosen step marked; below, that step's tokens shaded by its
// attention: evicted tokens struck out, reduced-precision entries underlined, the query outlined.
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"
#include "compute/spec.h"

namespace attn::fig {

namespace {

using core::DecodeCell;

struct Chip {
  int pos = -1;  // stream position, -1 for the "… N …" gap
  int row = 0;
  double x = 0, w = 0;
  QString label;
};

QString policy_name(const std::string& spec) {
  QString name;
  for (const SpecPiece& piece : parse_spec(spec))
    name += (name.isEmpty() ? "" : " + ") + qs(piece.id);
  return name;
}

QString policy_params(const std::string& spec) {
  QString params;
  for (const SpecPiece& piece : parse_spec(spec))
    for (const auto& [k, v] : piece.params)
      params += (params.isEmpty() ? "" : ", ") + qs(k + "=" + v);
  return params;
}

QString quoted(const std::string& piece) {
  return QString::fromUtf8("\u201c") + token_label(piece, 16) + QString::fromUtf8("\u201d");
}

// The detail's token chips: their size and spacing.
struct ChipStyle {
  double tok_pt = 0, box_h = 0, row_gap = 2.2, pad = 1.6, tok_gap = 1.2;
  double row_pitch() const { return box_h + row_gap; }
};

// The chips of the tokens shown, flowed into rows of `width`: every token when they fit in
// `max_rows`; else the first four (sinks) and the latest that fit, with a gap chip between.
std::vector<Chip> flow_chips(FigurePainter& c, const core::DecodeFigure& d, const ChipStyle& cs,
                             double width, int max_rows) {
  const int n = int(d.pieces.size());
  std::vector<int> order;
  std::vector<Chip> chips;
  auto place = [&](const std::vector<int>& positions) {
    chips.clear();
    double x = 0;
    int row = 0;
    for (int p : positions) {
      Chip ch;
      ch.pos = p;
      ch.label = p < 0 ? QString::fromUtf8("\u2026 %1 \u2026").arg(-p - 1)
                       : token_label(d.pieces[size_t(p)], 16);
      ch.w = c.text_width(ch.label, cs.tok_pt) + 2 * cs.pad;
      if (x + ch.w > width && x > 0) {
        ++row;
        x = 0;
      }
      ch.row = row;
      ch.x = x;
      x += ch.w + cs.tok_gap;
      chips.push_back(ch);
    }
    return row + 1;
  };
  for (int p = 0; p < n; ++p) order.push_back(p);
  if (place(order) <= max_rows) return chips;
  // Keep the first 4, then drop the oldest of the rest until it fits.
  const int sinks = std::min(4, n - 1);
  int from = sinks + 1;
  for (int step = std::max(1, (n - sinks) / 64);; from += step) {
    from = std::min(from, n - 1);
    order.clear();
    for (int p = 0; p < sinks; ++p) order.push_back(p);
    order.push_back(-(from - sinks) - 1);  // gap chip: how many left out
    for (int p = from; p < n; ++p) order.push_back(p);
    if (place(order) <= max_rows || from >= n - 1) return chips;
  }
}

// "Step 12: query “x” at position 40 → next “y” (−log p 2.31) · the cache holds ..."
QString step_heading(const core::DecodeFigure& d) {
  QString head = QString("Step %1: query %2 at position %3")
                     .arg(d.step)
                     .arg(quoted(d.pieces.empty() ? "" : d.pieces.back()))
                     .arg(d.query);
  if (!d.next.empty()) {
    head += QString::fromUtf8(" \u2192 next ") + quoted(d.next);
    if (std::isfinite(d.nll)) head += QString(" (\u2212log p %1)").arg(double(d.nll), 0, 'f', 2);
  }
  head += QString(" \u00b7 the cache holds %1 entries, %2 KiB")
              .arg(d.entries)
              .arg(d.bytes / 1024.0, 0, 'f', 1);
  return head;
}

// The overview's cells: attention where the cache held the entry, evicted entries in kDropped
// (outside the colour map), positions after the query in kHidden, entries stored in reduced
// precision hatched over their colour.
void draw_held_cells(FigurePainter& c, const QRectF& r, const core::DecodeFigure& d,
                     const Colorbar& bar, bool quantised) {
  CellSource src;
  src.rows = d.rows;
  src.cols = d.cols;
  std::vector<float> filled(d.attention.size());
  src.hidden.resize(d.attention.size());
  src.dropped.resize(d.attention.size());
  for (size_t i = 0; i < filled.size(); ++i) {
    const bool held = d.state[i] == DecodeCell::Held || d.state[i] == DecodeCell::Quantised;
    filled[i] = held && std::isfinite(d.attention[i]) ? d.attention[i] : 0.f;
    src.hidden[i] = d.state[i] == DecodeCell::Future;
    src.dropped[i] = d.state[i] == DecodeCell::Evicted ? 1 : 0;
  }
  src.values = &filled;
  draw_cells(c, r, src, bar.cmap, bar.vmax, bar.log_scale);
  if (!quantised) return;
  QPainterPath path;
  const double cw = r.width() / d.cols, chh = r.height() / d.rows;
  for (int row = 0; row < d.rows; ++row)
    for (int x = 0; x < d.cols;) {
      if (d.state[size_t(row) * d.cols + x] != DecodeCell::Quantised) {
        ++x;
        continue;
      }
      int x1 = x;
      while (x1 < d.cols && d.state[size_t(row) * d.cols + x1] == DecodeCell::Quantised) ++x1;
      path.addRect(QRectF(r.left() + x * cw, r.top() + row * chh, (x1 - x) * cw, chh));
      x = x1;
    }
  c.painter().save();
  c.painter().setPen(Qt::NoPen);
  c.painter().setBrush(QBrush(QColor(255, 255, 255, 120), Qt::BDiagPattern));
  c.painter().drawPath(path.simplified());
  c.painter().restore();
}

// The future (positions after each step's query) blank: a staircase, each row of the grid cut
// after the query of its last step.
void blank_future(FigurePainter& c, const QRectF& r, const core::DecodeFigure& d) {
  const double ph = r.height();
  QPolygonF future;
  future << QPointF(r.right(), r.top());
  for (int row = 0; row < d.rows; ++row) {
    const int last = int((int64_t(row + 1) * d.steps - 1) / d.rows);  // last step in the row
    const int cut = int((int64_t(d.first + last + 1) * d.cols + d.positions - 1) / d.positions);
    const double x = std::min(r.right(), r.left() + cut * r.width() / d.cols);
    future << QPointF(x, r.top() + row * ph / d.rows)
           << QPointF(x, r.top() + (row + 1) * ph / d.rows);
  }
  future << QPointF(r.right(), r.bottom());
  c.painter().save();
  c.painter().setPen(Qt::NoPen);
  c.painter().setBrush(Qt::white);
  c.painter().drawPolygon(future);
  c.painter().restore();
}

// The detailed step: markers on both sides of its row.
void mark_step(FigurePainter& c, const QRectF& r, const core::DecodeFigure& d) {
  const double row_h = r.height() / d.rows;
  const double ys = r.top() + (int64_t(d.step) * d.rows / d.steps + 0.5) * row_h;
  for (double sx : {r.left(), r.right()}) {
    const double dir = sx == r.left() ? -1 : 1;
    QPolygonF tri;
    tri << QPointF(sx, ys) << QPointF(sx + dir * 5, ys - 3) << QPointF(sx + dir * 5, ys + 3);
    c.painter().save();
    c.painter().setPen(Qt::NoPen);
    c.painter().setBrush(kAccent);
    c.painter().drawPolygon(tri);
    c.painter().restore();
  }
}

// Ticks: positions along the bottom, steps (as query positions) down the left; both titles.
void draw_decode_axes(FigurePainter& c, const QRectF& r, const core::DecodeFigure& d, double left) {
  const FigureStyle& s = c.style();
  const double lh_tick = c.line_height(s.tick_pt), pw = r.width(), ph = r.height();
  const double x_of = d.positions > 0 ? r.width() / d.positions : 0;
  for (double v : nice_ticks(0, d.positions - 1, std::max(2, int(pw / 45)))) {
    const double tx = r.left() + (v + 0.5) * x_of;
    c.line({tx, r.bottom()}, {tx, r.bottom() + 2.5});
    c.text({tx, r.bottom() + lh_tick / 2 + 0.5}, tick_label(v), s.tick_pt, 0, -1);
  }
  for (double v : nice_ticks(0, d.steps - 1, std::max(2, int(ph / 30)))) {
    const double ty = r.top() + (v + 0.5) * ph / d.steps;
    c.line({r.left() - 2, ty}, {r.left(), ty});
    c.text({r.left() - 7, ty}, tick_label(d.first + v), s.tick_pt, 1, 0);
  }
  draw_lines(c, {r.center().x(), r.bottom() + lh_tick * 1.5 + 4.5}, {"Stream position (key)"},
             s.label_pt, 0, kText, false, r.width());
  QString y_title = "Query position (step)";
  for (const char* shorter : {"Query (step)", "Step"})
    if (c.text_width(y_title, s.label_pt) > r.height()) y_title = shorter;
  draw_vertical_lines(c, {r.left() - left, r.center().y()}, {y_title}, s.label_pt, kText,
                      r.height());
}

// The step's tokens from `top`, shaded by its attention: evicted tokens struck out,
// reduced-precision entries underlined, the query outlined.
void draw_step_tokens(FigurePainter& c, double left, double top, const std::vector<Chip>& chips,
                      const ChipStyle& cs, const core::DecodeFigure& d, const Colorbar& bar) {
  for (const Chip& ch : chips) {
    const QRectF box(left + ch.x, top + ch.row * cs.row_pitch(), ch.w, cs.box_h);
    if (ch.pos < 0) {
      c.text({box.left() + cs.pad, box.center().y()}, ch.label, cs.tok_pt, -1, 0, kMuted, false, 0,
             ch.w - 2 * cs.pad);
      continue;
    }
    const DecodeCell cell = d.cells[size_t(ch.pos)];
    const bool held = cell == DecodeCell::Held || cell == DecodeCell::Quantised;
    QColor bg = cell == DecodeCell::Future ? kHidden : kDropped, fg = kMuted;
    if (held) {
      const float w = d.weight[size_t(ch.pos)];
      const render::Rgb8 k = render::colormap_rgb8(
          bar.cmap, render::color_position(std::isfinite(w) ? w : 0.f, bar.vmax, bar.log_scale));
      bg = QColor(k.r, k.g, k.b);
      const double lum = 0.2126 * k.r + 0.7152 * k.g + 0.0722 * k.b;
      fg = lum > 120 ? kText : QColor(Qt::white);
    }
    c.painter().fillRect(box, bg);
    c.text({box.left() + cs.pad, box.center().y()}, ch.label, cs.tok_pt, -1, 0, fg, false, 0,
           ch.w - 2 * cs.pad);
    if (!held)
      c.line({box.left() + 1, box.center().y()}, {box.right() - 1, box.center().y()}, kMuted, 0.6);
    if (cell == DecodeCell::Quantised) {  // dashed underline in the text's colour
      QPen pen(fg, 0.8, Qt::DashLine);
      c.painter().save();
      c.painter().setPen(pen);
      c.painter().drawLine(QPointF(box.left() + 1, box.bottom() - 1),
                           QPointF(box.right() - 1, box.bottom() - 1));
      c.painter().restore();
    }
    if (ch.pos == d.query) c.rect_outline(box.adjusted(0.4, 0.4, -0.4, -0.4), kAccent, 1.0);
  }
}

}  // namespace

double paint_decode(FigurePainter& c, const QRectF& area, const FigureData& fd) {
  const FigureStyle& s = c.style();
  const core::DecodeFigure& d = fd.decode;
  if (d.rows <= 0 || d.cols <= 0) return area.top();
  const render::Colormap cmap = render::colormap_from_name(fd.settings.colormap);
  double vmax = 0;
  for (float v : d.attention)
    if (std::isfinite(v)) vmax = std::max(vmax, double(v));
  if (!(vmax > 0)) vmax = 1;
  const Colorbar bar{cmap, vmax, fd.settings.log_scale, "Attention of the step's query"};
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  const double left = lh_label + 4 + c.text_width("10000", s.tick_pt) + 6;
  const double bottom_axis = lh_tick / 2 + 0.5 + lh_tick + 4 + lh_label;
  const bool quantised = std::any_of(d.state.begin(), d.state.end(),
                                     [](DecodeCell x) { return x == DecodeCell::Quantised; });
  std::vector<LegendItem> legend = {{LegendItem::Swatch, kDropped, 0, "evicted (not in the cache)"},
                                    {LegendItem::Swatch, kHidden, 0, "after the query (future)"},
                                    {LegendItem::Swatch, kAccent, 0, "the step shown below"}};
  if (quantised)
    legend.push_back({LegendItem::Dashed, kAxis, 0,
                      "stored in reduced precision (hatched above, dashed below)"});
  const double legend_h = draw_legend(c, {0, 0}, area.width(), legend, false);

  // The step in detail: a heading, then the tokens flowed into rows.
  ChipStyle cs;
  cs.tok_pt = s.tick_pt + 0.5;
  cs.box_h = c.line_height(cs.tok_pt) + 2.5;
  const double row_pitch = cs.row_pitch();
  const std::vector<QString> head_lines =
      wrap_text(c, step_heading(d), s.label_pt, area.width(), true);
  const double head_h = double(head_lines.size()) * lh_label + 3;
  const int natural_rows = [&] {
    const std::vector<Chip> all = flow_chips(c, d, cs, area.width(), 1 << 20);
    return all.empty() ? 1 : all.back().row + 1;
  }();
  // Heights: the overview takes what the detail leaves on a page (at least 45%), or a height in
  // proportion to its width at a free height; the detail shows at most 14 rows there.
  // The panel's width, caption and height and the colour bar's width depend on each other: a
  // few rounds settle them.
  int rows_shown = std::min(natural_rows, 14);
  double ph = 160, pw = 40, cap_h = 0;
  Caption cap;
  for (int it = 0; it < 3; ++it) {
    pw = std::max(40.0, area.width() - left - colorbar_width(c, bar, ph) - kColorbarGap);
    cap = text_caption(c, policy_name(d.policy), policy_params(d.policy), pw);
    cap_h = caption_height(c, cap);
    const double fixed = cap_h + bottom_axis + 8 + legend_h + 10 + head_h;
    if (c.free_height()) {
      ph = std::clamp(pw * 0.5, 90.0, 320.0);
    } else {
      const double avail = area.height() - fixed;
      rows_shown = std::max(1, std::min(std::min(natural_rows, 14), int(avail * 0.55 / row_pitch)));
      ph = std::max(30.0, avail - rows_shown * row_pitch);
    }
  }
  const std::vector<Chip> chips = flow_chips(c, d, cs, area.width(), rows_shown);

  // ---- overview ----
  double y = area.top();
  draw_caption(c, {area.left() + left, y}, pw, cap);
  y += cap_h;
  const QRectF r(area.left() + left, y, pw, ph);
  draw_held_cells(c, r, d, bar, quantised);
  blank_future(c, r, d);
  c.rect_outline(r);
  mark_step(c, r, d);
  draw_decode_axes(c, r, d, left);
  draw_colorbar(c, QRectF(r.right() + kColorbarGap, r.top(), kColorbarBar, ph), bar);
  y = r.bottom() + bottom_axis + 8;
  draw_legend(c, {area.left(), y}, area.width(), legend);
  y += legend_h + 10;

  // ---- the step in detail ----
  draw_lines(c, {area.left(), y}, head_lines, s.label_pt, -1, kText, true, area.width());
  y += head_h;
  draw_step_tokens(c, area.left(), y, chips, cs, d, bar);
  const int used_rows = chips.empty() ? 1 : chips.back().row + 1;
  const double end = y + used_rows * row_pitch;
  return c.free_height() ? end : area.bottom();
}

}  // namespace attn::fig
