// Preset "sinks": bars of the attention mass each token receives (mean over heads and queries),
// one row per layer (at most six, evenly spread, always the first and last), sinks highlighted.
// Every row's axis runs to a round tick at or above its tallest bar.
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {
namespace {

// One layer's row: its y ticks, a bar per token (sinks highlighted), the threshold dashed, and
// the layer's name above.
void draw_layer_row(FigurePainter& c, const QRectF& r, const SinkData& k, int l,
                    const std::vector<double>& yt, double ytick_w, double bw) {
  const FigureStyle& s = c.style();
  const double lh_tick = c.line_height(s.tick_pt), ymax = yt.back();
  for (double t : yt) {
    const double y = r.bottom() - t / ymax * r.height();
    c.line({r.left(), y}, {r.right(), y}, kGrid, s.line_pt * 0.8);
    c.line({r.left() - 2, y}, {r.left(), y});
    // A row too short for two labels names its top only.
    if (t == yt.back() || r.height() >= lh_tick * 1.1)
      c.text({r.left() - 3, y}, tick_label(t), s.tick_pt, 1, 0, kText, false, 0, ytick_w);
  }
  c.painter().save();
  c.painter().setPen(Qt::NoPen);
  for (int j = 0; j < k.n; ++j) {
    const double v = k.received[size_t(l) * k.n + j];
    const bool sink = v > k.threshold;
    const double hgt = std::max(0.0, v) / ymax * r.height();
    const QRectF bar(r.left() + j * bw + bw * 0.12, r.bottom() - hgt, bw * 0.76, hgt);
    c.painter().fillRect(bar, sink ? kAccent : series_color(0));
    c.mark(bar, r);
  }
  c.painter().restore();
  const double ty = r.bottom() - k.threshold / ymax * r.height();
  c.painter().save();
  c.painter().setPen(QPen(kMuted, s.line_pt, Qt::DashLine));
  c.painter().drawLine(QPointF(r.left(), ty), QPointF(r.right(), ty));
  c.painter().restore();
  c.line(r.bottomLeft(), r.bottomRight());
  c.line(r.bottomLeft(), r.topLeft());
  c.text({r.right(), r.top() - 1.5}, QString("layer %1").arg(l), s.tick_pt, 1, 1, kText, true);
}

}  // namespace

double paint_sinks(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const SinkData& k = d.sinks;
  if (k.n_layers == 0 || k.n == 0) return area.top();
  std::vector<int> layers;
  const int shown = std::min(k.n_layers, 6);
  for (int i = 0; i < shown; ++i) {
    const int l = shown == 1 ? 0 : int(std::lround(double(i) * (k.n_layers - 1) / (shown - 1)));
    if (layers.empty() || layers.back() != l) layers.push_back(l);
  }
  const int R = int(layers.size());
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);

  // Legend across the top, wrapped when the page is narrow.
  const std::vector<LegendItem> legend = {
      {LegendItem::Swatch, series_color(0), 0, "mass received (mean over heads and queries)"},
      {LegendItem::Swatch, kAccent, 0, QString("sink (> %1 in a layer)").arg(k.threshold)},
      {LegendItem::Dashed, kMuted, 0, "threshold"}};
  const double legend_h = draw_legend(c, area.topLeft(), area.width(), legend, false) + 6;

  // Token labels under the last row: thinned to fit, every sink named when it fits beside the
  // others (sinks first, then the evenly spaced ones).
  double data_max = 0;
  for (int l : layers)
    for (int j = 0; j < k.n; ++j)
      data_max = std::max(data_max, double(k.received[size_t(l) * k.n + j]));
  const double ymax0 = std::max(data_max, k.threshold * 1.1);
  double ytick_w = 0;
  for (int n = 2; n <= 5; ++n)  // whichever count the rows' height allows
    for (double t : cover_ticks(0, ymax0, n))
      ytick_w = std::max(ytick_w, c.text_width(tick_label(t), s.tick_pt));
  auto is_sink = [&](int j) {
    return std::find(k.sinks.begin(), k.sinks.end(), j) != k.sinks.end();
  };
  // The y title's lines depend on the rows' span, which depends on the x labels; once is enough.
  std::vector<QString> ytitle = {"Mass received"};
  double left = 0, width = 0, bw = 0, xlab_h = 0;
  std::vector<int> js;
  std::vector<QString> xtitle;
  auto arrange = [&] {
    left = ytitle.size() * lh_label + 4 + ytick_w + 4;
    width = area.width() - left - 4;
    bw = width / k.n;
    const double each = lh_tick * 1.05;
    const int sep = std::max(1, int(std::ceil(each / std::max(bw, 1e-9) - 1e-9)));
    std::vector<int> cand = k.sinks;
    for (int j : thinned(k.n, width, each)) cand.push_back(j);
    js.clear();
    for (int j : cand) {
      if (j < 0 || j >= k.n) continue;
      bool free = true;
      for (int a : js) free = free && std::abs(a - j) >= sep;
      if (free) js.push_back(j);
    }
    std::sort(js.begin(), js.end());
    xlab_h = 0;
    for (int j : js)
      xlab_h =
          std::max(xlab_h, c.text_width(token_label(k.labels[size_t(j)]), s.tick_pt, is_sink(j)));
    xtitle = wrap_text(c, "Token", s.label_pt, width);
  };
  arrange();
  const double xlab_y = lh_tick / 2 + 0.5;  // clear of the last row's "0" label
  const double bottom = xlab_y + xlab_h + 3 + xtitle.size() * lh_label;
  const double name_h = lh_tick + 3;  // the layer's name above each row
  // On a page the rows share what is left; at a free height each gets a height in proportion to
  // the width.
  const double row_h = c.free_height()
                           ? std::clamp(width * 0.3 / R, 3 * lh_tick, 90.0)
                           : std::max(4.0, (area.height() - legend_h - bottom - R * name_h) / R);
  const double rows_h = R * (row_h + name_h);
  ytitle = wrap_text(c, "Mass received", s.label_pt, rows_h);
  arrange();
  const std::vector<double> yt =
      cover_ticks(0, ymax0, std::clamp(int(row_h / (lh_tick * 1.4)) + 1, 2, 5));
  const double x0 = area.left() + left;

  draw_legend(c, area.topLeft(), area.width(), legend);

  for (int i = 0; i < R; ++i) {
    const int l = layers[size_t(i)];
    const QRectF r(x0, area.top() + legend_h + i * (row_h + name_h) + name_h, width, row_h);
    draw_layer_row(c, r, k, l, yt, ytick_w, bw);
  }
  const double yb = area.top() + legend_h + R * (row_h + name_h);
  for (int j : js) {
    const double x = x0 + (j + 0.5) * bw;
    const bool sink = is_sink(j);
    c.line({x, yb}, {x, yb + 2});
    c.text({x, yb + xlab_y}, token_label(k.labels[size_t(j)]), s.tick_pt, 1, 0,
           sink ? kAccent : kText, sink, -90, xlab_h);
  }
  draw_lines(c, {x0 + width / 2, yb + xlab_y + xlab_h + 3}, xtitle, s.label_pt, 0, kText, false,
             width);
  draw_vertical_lines(c, {area.left(), area.top() + legend_h + rows_h / 2}, ytitle, s.label_pt,
                      kText, rows_h);
  return c.free_height() ? yb + bottom : area.bottom();
}

}  // namespace attn::fig
