// Preset "cache": the cache timeline of one layer and KV head, one panel per KV-cache policy:
// tokens across, passes (steps) down, each cell coloured by the fraction of its tokens the
// cache held after that pass (grey where the tokens were still to come), with a shared colour
// bar. Sinks show as a band down the left (marked, and never thinner than 1.5 pt however long the
// stream), a window as a diagonal strip, score-based eviction as scattered survivors.
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"
#include "compute/spec.h"

namespace attn::fig {

namespace {

// "kv_streaming + kv_quant" over "sinks=4, window=60, ...": a policy is not a variant, so its
// caption comes from the spec grammar alone.
Caption policy_caption(const FigurePainter& c, const std::string& spec, double width) {
  QString name, params;
  for (const SpecPiece& piece : parse_spec(spec)) {
    name += (name.isEmpty() ? "" : " + ") + qs(piece.id);
    for (const auto& [k, v] : piece.params)
      params += (params.isEmpty() ? "" : ", ") + qs(k + "=" + v);
  }
  return text_caption(c, name, params, width);
}

}  // namespace

double paint_cache(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const CacheFigure& cf = d.cache;
  if (cf.panels.empty()) return area.top();
  const int k = int(cf.panels.size());
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  const Colorbar bar{render::Colormap::Viridis, 1.0, false, "Fraction of the tokens held"};
  const double left = lh_label + 4 + c.text_width("10000", s.tick_pt) + 4;
  const double bottom = lh_tick / 2 + 0.5 + lh_tick + 4 + lh_label;
  const double gap = 14, note_h = lh_tick + 4;
  // Tokens held through every pass (sinks) are marked above their panel and drawn at least
  // kMarkWidth wide: over thousands of tokens a cell pools many, and a sink's share would vanish.
  bool marks = false;
  for (const CacheTimeline& t : cf.panels) marks = marks || !t.persistent.empty();
  const std::vector<LegendItem> legend = {
      {LegendItem::Marker, kAccent, 2, "held through every pass (sinks), drawn at any length"}};
  const double legend_h = marks ? draw_legend(c, {0, 0}, area.width(), legend, false) + 4 : 0;
  constexpr double kMarkWidth = 1.5;
  // Panel width, caption height, panel height and colour-bar width depend on each other: a few
  // rounds settle them. On a page too small for every panel, the first ones are drawn and a
  // note says how many more there are.
  int m = k, cols = 1, rows = 1;
  double ph = 120, pw = 30, cap_h = 0, bar_w = 0;
  std::vector<Caption> caps;
  for (; m >= 1; --m) {
    // As many columns as leave each panel 100 points, up to 3 (2 for four panels).
    const int fit = std::max(1, int((area.width() - 60) / (left + 100 + gap)));
    cols = std::min(m <= 3 ? m : m == 4 ? 2 : 3, fit);
    rows = (m + cols - 1) / cols;
    const double avail = area.height() - (m < k ? note_h : 0) - legend_h;
    ph = 120;
    for (int it = 0; it < 3; ++it) {
      bar_w = colorbar_width(c, bar, ph);
      pw = std::max(20.0,
                    (area.width() - bar_w - kColorbarGap - cols * left - (cols - 1) * gap) / cols);
      caps.clear();
      cap_h = 0;
      for (int i = 0; i < m; ++i) {
        caps.push_back(policy_caption(c, cf.panels[size_t(i)].spec, pw));
        cap_h = std::max(cap_h, caption_height(c, caps.back()));
      }
      ph = c.free_height() ? std::clamp(pw * 0.75, 60.0, 260.0)
                           : (avail - rows * (cap_h + bottom)) / rows;
    }
    if (c.free_height() || ph >= 40 || m == 1) break;
  }
  ph = std::max(ph, 10.0);
  double y = area.top();
  QRectF first;
  for (int i = 0; i < m; ++i) {
    const CacheTimeline& t = cf.panels[size_t(i)];
    const int col = i % cols, row = i / cols;
    if (col == 0 && row > 0) y += cap_h + ph + bottom;
    const double x = area.left() + col * (left + pw + gap) + left;
    draw_caption(c, {x, y}, pw, caps[size_t(i)]);
    const QRectF r(x, y + cap_h, pw, ph);
    if (i == 0) first = r;
    CellSource src;
    src.rows = t.rows;
    src.cols = t.cols;
    src.values = &t.kept;
    src.hidden.resize(t.kept.size());
    for (size_t e = 0; e < t.kept.size(); ++e) src.hidden[e] = std::isnan(t.kept[e]);
    std::vector<float> filled = t.kept;  // NaN cells are hidden; the colour map needs numbers
    for (float& v : filled)
      if (std::isnan(v)) v = 0;
    src.values = &filled;
    draw_cells(c, r, src, bar.cmap, 1.0, false);
    if (!t.persistent.empty() && t.tokens > 0) {
      const render::Rgb8 top = render::colormap_rgb8(bar.cmap, 1.0);
      const double cw = std::max(kMarkWidth, r.width() / t.cols);
      for (int tok : t.persistent) {
        const double x = r.left() + (tok + 0.5) / t.tokens * r.width();
        const double x0 = std::clamp(x - cw / 2, r.left(), r.right() - cw);
        c.painter().fillRect(QRectF(x0, r.top(), cw, r.height()), QColor(top.r, top.g, top.b));
        draw_marker(c.painter(), {x0 + cw / 2, r.top() - 2.2}, 2, kAccent, 1.8);
      }
    }
    c.rect_outline(r);
    // Ticks: tokens along the bottom, passes down the left, at the ends and in between.
    for (double f : {0.0, 0.5, 1.0}) {
      const double tx = r.left() + f * r.width();
      c.line({tx, r.bottom()}, {tx, r.bottom() + 2.5});
      c.text({tx, r.bottom() + lh_tick / 2 + 0.5}, tick_label(std::round(f * t.tokens)), s.tick_pt,
             f == 0   ? -1
             : f == 1 ? 1
                      : 0,
             -1);
      const double ty = r.top() + f * r.height();
      c.line({r.left() - 2, ty}, {r.left(), ty});
      c.text({r.left() - 3, ty}, tick_label(std::round(f * t.passes)), s.tick_pt, 1,
             f == 0   ? -1
             : f == 1 ? 1
                      : 0);
    }
    draw_lines(c, {r.center().x(), r.bottom() + lh_tick * 1.5 + 4.5}, {"Token"}, s.label_pt, 0,
               kText, false, r.width());
    // A short panel (many policies on a small page) takes the shorter title.
    const QString y_title =
        c.text_width("Pass (step)", s.label_pt) <= r.height() ? "Pass (step)" : "Pass";
    draw_vertical_lines(c, {r.left() - left, r.center().y()}, {y_title}, s.label_pt, kText,
                        r.height());
  }
  const double right = area.left() + cols * (left + pw + gap) - gap + kColorbarGap;
  draw_colorbar(c, QRectF(right, first.top(), kColorbarBar, ph), bar);
  double end = y + cap_h + ph + bottom;
  if (marks) {
    draw_legend(c, {area.left(), end + 2}, area.width(), legend);
    end += legend_h;
  }
  if (m < k) {
    const QString note =
        "+ " + QString::number(k - m) + " more (a taller figure shows every policy)";
    c.text({area.left(), end + 2}, note, s.tick_pt, -1, -1, kMuted, false, 0, area.width());
    end += note_h;
  }
  return c.free_height() ? end : area.bottom();
}

}  // namespace attn::fig
