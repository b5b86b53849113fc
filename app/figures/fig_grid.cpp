// Preset "grid": one metric per (layer, head) for dense and the variants, values in the cells.
#include <algorithm>
#include <cmath>

#include "app/core/head_metrics.h"
#include "app/figures/presets.h"

namespace attn::fig {

double paint_head_grids(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  if (d.grids.empty()) return area.top();
  const std::string& metric = d.settings.grid_metric;
  const int K = int(d.grids.size());
  const int L = d.grids.front().n_layers, H = d.grids.front().n_heads;
  // Metrics are not probabilities: always a linear scale from 0.
  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    for (const HeadGrid& g : d.grids)
      for (float v : g.metric(metric))
        if (std::isfinite(v)) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const render::Colormap cmap = render::colormap_from_name(d.settings.colormap);
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  const double cbw = colorbar_width(c), gap = 14;
  const double left = lh_label + 4 + c.text_width("00", s.tick_pt) + 4;
  const double top = caption_height(c) + 2, bottom = 3 + lh_tick + 3 + lh_label + 2;
  // Cells as square as the space allows.
  const double cell =
      std::max(4.0, std::min((area.width() - left - cbw - 10 - (K - 1) * gap) / (K * H),
                             (area.height() - top - bottom) / L));
  const double gw = cell * H, gh = cell * L;
  const double block_w = left + K * gw + (K - 1) * gap + 10 + cbw;
  const double x0 = area.left() + std::max(0.0, (area.width() - block_w) / 2);
  const double value_pt = std::min(s.tick_pt, cell * 0.32);
  const std::vector<int> hs = thinned(H, gw, c.text_width("000", s.tick_pt));
  const std::vector<int> ls = thinned(L, gh, lh_tick * 1.1);

  for (int k = 0; k < K; ++k) {
    const HeadGrid& g = d.grids[size_t(k)];
    const std::vector<float>& v = g.metric(metric);
    const QRectF r(x0 + left + k * (gw + gap), area.top() + top, gw, gh);
    draw_caption(c, {r.left(), r.top() - top}, gw + gap - 3, g.spec, "softmax over all keys");
    CellSource src{L, H, &v, {}};
    draw_cells(c, r, src, cmap, vmax, false);
    c.rect_outline(r);
    if (value_pt >= 4.0) {  // numbers inside the cells when they are legible
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
          const float x = v[size_t(l) * size_t(H) + size_t(h)];
          const render::Rgb8 bg =
              render::colormap_rgb8(cmap, render::color_position(x, vmax, false));
          const double lum = 0.2126 * bg.r + 0.7152 * bg.g + 0.0722 * bg.b;
          c.text({r.left() + (h + 0.5) * cell, r.top() + (l + 0.5) * cell},
                 std::isfinite(x) ? QString::number(x, 'f', x < 10 ? 2 : 1) : "\u2013", value_pt, 0,
                 0, lum > 140 ? kText : QColor(Qt::white));
        }
    }
    for (int h : hs) {
      const double x = r.left() + (h + 0.5) * cell;
      c.line({x, r.bottom()}, {x, r.bottom() + 2});
      c.text({x, r.bottom() + 3}, QString::number(h), s.tick_pt, 0, -1);
    }
    c.text({r.center().x(), r.bottom() + 3 + lh_tick + 3}, "Head", s.label_pt, 0, -1);
    if (k == 0) {
      for (int l : ls) {
        const double y = r.top() + (l + 0.5) * cell;
        c.line({r.left() - 2, y}, {r.left(), y});
        c.text({r.left() - 3, y}, QString::number(l), s.tick_pt, 1, 0);
      }
      c.text({r.left() - 4 - c.text_width("00", s.tick_pt) - 4, r.center().y()}, "Layer",
             s.label_pt, 0, 1, kText, false, -90);
    }
  }
  const QRectF cb(x0 + left + K * gw + (K - 1) * gap + 10, area.top() + top, 8, gh);
  draw_colorbar(c, cb, cmap, vmax, false, qs(core::head_metric_title(metric)));
  return area.top() + top + gh + bottom;
}

}  // namespace attn::fig
