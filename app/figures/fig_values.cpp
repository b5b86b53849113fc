// Presets "heads" and "patch": panels of values on a rows x cols grid (layers x heads, or layers
// x positions) on one colour scale, values in the cells when they fit; a diverging scale around
// 0 when the values go negative (patching effects).
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {
namespace {

constexpr double kGap = 14;      // between panels
constexpr double kRowGap = 8;    // between rows of panels
constexpr double kMaxCell = 40;  // cells never grow past this (points)

QString cell_text(float x) {
  return std::isfinite(x) ? num_fixed(x, std::abs(x) < 10 ? 2 : 1) : "\u2013";
}

struct Layout {
  int ncol = 1, nrow = 1;
  double cell = 1, left = 0, top = 0, bottom = 0, bar_w = 0;
  int R = 0, C = 0;
  std::vector<Caption> caps;
  std::vector<QString> rtitle, ctitle, stitle;  // row, column and colour-bar titles, wrapped
  double rroom() const { return gh() + top; }
  double sroom() const { return std::max(gh(), 40.0); }
  double gw() const { return cell * C; }
  double gh() const { return cell * R; }
  double block_h() const { return nrow * (top + gh() + bottom) + (nrow - 1) * kRowGap; }
  double block_w() const { return left + ncol * gw() + (ncol - 1) * kGap + kColorbarGap + bar_w; }
};

// Tick values of the colour bar: its ends, and 0 on a diverging scale.
std::vector<double> bar_ticks(const core::ValueGrids& v) {
  const double lo = v.vmin, hi = v.vmax > v.vmin ? v.vmax : v.vmin + 1;
  std::vector<double> t = {lo, hi};
  if (lo < 0 && hi > 0) t.insert(t.begin() + 1, 0.0);
  return t;
}

double bar_label_width(const FigurePainter& c, const core::ValueGrids& v) {
  double w = 0;
  for (double t : bar_ticks(v)) w = std::max(w, c.text_width(tick_label(t), c.style().tick_pt));
  return w;
}

Layout arrange(const FigurePainter& c, const QRectF& area, const FigureData& d, int ncol) {
  const FigureStyle& s = c.style();
  const core::ValueGrids& v = d.values;
  Layout l;
  l.R = v.panels.front().rows;
  l.C = v.panels.front().cols;
  l.ncol = ncol;
  l.nrow = (int(v.panels.size()) + ncol - 1) / ncol;
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  double label_w = 0;  // column labels (tokens) stand rotated below the grid
  for (const std::string& t : v.col_labels)
    label_w = std::max(label_w, c.text_width(token_label(t), s.tick_pt));
  const double col_lab = v.col_labels.empty() ? lh_tick : label_w;
  l.cell = kMaxCell;
  for (int it = 0; it < 5; ++it) {
    const double room = l.gw() + kGap - 3;
    l.caps.clear();
    double cap_h = 0;
    for (const core::ValueGrid& g : v.panels) {
      l.caps.push_back(text_caption(c, qs(g.caption), "", std::max(room, 20.0)));
      cap_h = std::max(cap_h, caption_height(c, l.caps.back()));
    }
    l.top = cap_h;
    l.rtitle = wrap_text(c, qs(v.row_title), s.label_pt, l.rroom());
    l.ctitle = wrap_text(c, qs(v.col_title), s.label_pt, std::max(room, 20.0));
    l.stitle = v.scale_title.empty() ? std::vector<QString>{}
                                     : wrap_text(c, qs(v.scale_title), s.label_pt, l.sroom());
    l.bottom = 3 + col_lab + 3 + double(l.ctitle.size()) * lh_label;
    l.left = double(l.rtitle.size()) * lh_label + 4 +
             c.text_width(QString::number(l.R - 1), s.tick_pt) + 4;
    l.bar_w = kColorbarBar + 3.5 + bar_label_width(c, v) + 3 + double(l.stitle.size()) * lh_label;
    if (it == 4) break;  // the titles wrapped for the final cell size
    const double by_w = (area.width() - l.left - kColorbarGap - l.bar_w - (ncol - 1) * kGap) /
                        (ncol * std::max(1, l.C));
    const double by_h =
        c.free_height() ? 1e9
                        : (area.height() - l.nrow * (l.top + l.bottom) - (l.nrow - 1) * kRowGap) /
                              (l.nrow * std::max(1, l.R));
    l.cell = std::max(1.0, std::min({kMaxCell, by_w, by_h}));
  }
  return l;
}

}  // namespace

double paint_value_grids(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const core::ValueGrids& v = d.values;
  if (v.panels.empty() || v.panels.front().rows <= 0 || v.panels.front().cols <= 0)
    return area.top();
  const bool diverging = v.vmin < 0;
  const double lo = v.vmin, hi = v.vmax > v.vmin ? v.vmax : v.vmin + 1;
  const render::Colormap cmap = diverging ? render::Colormap::Diverging : render::Colormap::Viridis;
  const int K = int(v.panels.size());
  const int ncol = choose_columns(c, K, [&](int n) { return arrange(c, area, d, n).cell; });
  const Layout l = arrange(c, area, d, ncol);
  const double cell = l.cell, gw = l.gw(), gh = l.gh();
  const double x0 = area.left() + std::max(0.0, (area.width() - l.block_w()) / 2);
  const double y0 =
      area.top() + (c.free_height() ? 0 : std::max(0.0, (area.height() - l.block_h()) / 2));
  const double lh_tick = c.line_height(s.tick_pt);
  double value_pt = std::min(s.tick_pt, cell * 0.32);
  double widest = 0;
  for (const core::ValueGrid& g : v.panels)
    for (float x : g.values) widest = std::max(widest, c.text_width(cell_text(x), value_pt));
  if (widest > cell * 0.86) value_pt *= cell * 0.86 / widest;
  const std::vector<int> cs =
      thinned(l.C, gw,
              v.col_labels.empty() ? c.text_width(QString::number(l.C - 1) + "0", s.tick_pt)
                                   : lh_tick * 1.1);
  const std::vector<int> rs = thinned(l.R, gh, lh_tick * 1.1);
  auto position = [&](float x) { return (double(x) - lo) / (hi - lo); };
  for (int k = 0; k < K; ++k) {
    const core::ValueGrid& g = v.panels[size_t(k)];
    const int col = k % ncol, row = k / ncol;
    const QRectF r(x0 + l.left + col * (gw + kGap),
                   y0 + row * (l.top + gh + l.bottom + kRowGap) + l.top, gw, gh);
    draw_caption(c, {r.left(), r.top() - l.top}, std::max(gw + kGap - 3, 20.0), l.caps[size_t(k)]);
    std::vector<float> pos(g.values.size());
    CellSource src{g.rows, g.cols, &pos, std::vector<bool>(g.values.size(), false), {}};
    for (size_t i = 0; i < pos.size(); ++i) {
      pos[i] = float(std::clamp(position(g.values[i]), 0.0, 1.0));
      src.hidden[i] = !std::isfinite(g.values[i]);
    }
    draw_cells(c, r, src, cmap, 1.0, false);
    c.rect_outline(r);
    if (value_pt >= 4.0)
      for (int y = 0; y < g.rows; ++y)
        for (int x = 0; x < g.cols; ++x) {
          const float val = g.values[size_t(y) * size_t(g.cols) + size_t(x)];
          const render::Rgb8 bg = render::colormap_rgb8(cmap, std::clamp(position(val), 0.0, 1.0));
          const double lum = 0.2126 * bg.r + 0.7152 * bg.g + 0.0722 * bg.b;
          const QColor ink = lum > 140 || !std::isfinite(val) ? kText : QColor(Qt::white);
          const size_t i = size_t(y) * size_t(g.cols) + size_t(x);
          // The 95% interval under the value, as +-half its width, where a cell holds two lines.
          const double half = g.lo.size() == g.values.size() && g.hi.size() == g.values.size()
                                  ? (double(g.hi[i]) - g.lo[i]) / 2
                                  : std::nan("");
          const double ci_pt = value_pt * 0.8;
          const QString ci = "\u00b1" + num_fixed(half, 2);
          const bool two = std::isfinite(half) && std::isfinite(val) &&
                           cell > 2.6 * c.line_height(value_pt) &&
                           c.text_width(ci, ci_pt) < cell * 0.86;
          const QPointF mid(r.left() + (x + 0.5) * cell, r.top() + (y + 0.5) * cell);
          if (!two) {
            c.text(mid, cell_text(val), value_pt, 0, 0, ink, false, 0, cell);
            continue;
          }
          c.text(mid, cell_text(val), value_pt, 0, 1, ink, false, 0, cell);
          c.text({mid.x(), mid.y() + 0.5}, ci, ci_pt, 0, -1, ink, false, 0, cell);
        }
    double lab_h = lh_tick;
    for (int x : cs) {
      const double xx = r.left() + (x + 0.5) * cell;
      c.line({xx, r.bottom()}, {xx, r.bottom() + 2});
      if (v.col_labels.empty()) {
        c.text({xx, r.bottom() + 3}, QString::number(x), s.tick_pt, 0, -1);
      } else {
        const QString t = token_label(v.col_labels[size_t(x)]);
        c.text({xx, r.bottom() + 3}, t, s.tick_pt, 1, 0, kText, false, -90);
      }
    }
    if (!v.col_labels.empty())
      for (const std::string& t : v.col_labels)
        lab_h = std::max(lab_h, c.text_width(token_label(t), s.tick_pt));
    draw_lines(c, {r.center().x(), r.bottom() + 3 + lab_h + 3}, l.ctitle, s.label_pt, 0, kText,
               false, std::max(gw + kGap - 3, 20.0));
    if (col == 0) {
      for (int y : rs) {
        const double yy = r.top() + (y + 0.5) * cell;
        c.line({r.left() - 2, yy}, {r.left(), yy});
        c.text({r.left() - 3, yy}, QString::number(y), s.tick_pt, 1, 0);
      }
      draw_vertical_lines(c, {r.left() - l.left, r.center().y()}, l.rtitle, s.label_pt, kText,
                          l.rroom());
    }
  }
  // Colour bar: the map's anchors as a gradient, ticks at the ends (and 0 when diverging).
  const QRectF bar(x0 + l.left + ncol * gw + (ncol - 1) * kGap + kColorbarGap, y0 + l.top,
                   kColorbarBar, gh);
  QPainter& p = c.painter();
  QLinearGradient grad(bar.bottomLeft(), bar.topLeft());
  const std::vector<render::Rgb8> stops = render::colormap_stops(cmap);
  for (size_t i = 0; i < stops.size(); ++i)
    grad.setColorAt(double(i) / double(stops.size() - 1),
                    QColor(stops[i].r, stops[i].g, stops[i].b));
  p.save();
  p.setPen(Qt::NoPen);
  p.fillRect(bar, QBrush(grad));
  p.restore();
  c.rect_outline(bar);
  for (double t : bar_ticks(v)) {
    const double y = bar.bottom() - (t - lo) / (hi - lo) * bar.height();
    c.line({bar.right(), y}, {bar.right() + 2.5, y});
    c.text({bar.right() + 3.5, y}, tick_label(t), s.tick_pt, -1, 0, kText);
  }
  if (!v.scale_title.empty())
    draw_vertical_lines(c, {bar.right() + 3.5 + bar_label_width(c, v) + 3, bar.center().y()},
                        wrap_text(c, qs(v.scale_title), s.label_pt, std::max(gh, 40.0)), s.label_pt,
                        kText, std::max(gh, 40.0));
  return y0 + l.block_h();
}

}  // namespace attn::fig
