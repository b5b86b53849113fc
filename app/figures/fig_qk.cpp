// Preset "qk": one head's queries (circles) and keys (triangles) in one 2-D map, coloured by
// position in their input, so that a query lies near the keys it scores highest
// (app/core/attribution/qk_embedding.h). The map's axes have no units: only distances mean
// something, so the frame carries no ticks.
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {

double paint_qk(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const core::QkFigure& f = d.qk;
  const FigureStyle& s = c.style();
  if (f.x.empty()) return area.top();
  const Colorbar cb{render::Colormap::Viridis, 1.0, false, "position in its input"};
  const std::vector<LegendItem> legend = {
      {LegendItem::Marker, kText, 0, "query"},
      {LegendItem::Marker, kText, 2, "key (translated and scaled: near = high score)"}};
  const double leg_h = draw_legend(c, area.topLeft(), area.width(), legend, false);
  double side = area.width() - kColorbarGap - 40;
  if (!c.free_height()) side = std::min(side, area.height() - leg_h - 8);
  side = std::max(side, 40.0);
  double cbw = colorbar_width(c, cb, side, side);
  side = std::min(side, area.width() - kColorbarGap - cbw);
  cbw = colorbar_width(c, cb, side, side);
  const double x0 = area.left() + std::max(0.0, (area.width() - side - kColorbarGap - cbw) / 2);
  const QRectF r(x0, area.top(), side, side);
  float xlo = *std::min_element(f.x.begin(), f.x.end()),
        xhi = *std::max_element(f.x.begin(), f.x.end());
  float ylo = *std::min_element(f.y.begin(), f.y.end()),
        yhi = *std::max_element(f.y.begin(), f.y.end());
  const float span = std::max({xhi - xlo, yhi - ylo, 1e-12f});  // one scale for both axes
  const float cx = 0.5f * (xlo + xhi), cy = 0.5f * (ylo + yhi);
  const double inner = side - 8;
  QPainter& p = c.painter();
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  // Keys first, queries over them; later positions on top.
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < f.x.size(); ++i) {
      if ((f.key[i] != 0) != (pass == 0)) continue;
      const QPointF at(r.center().x() + (f.x[i] - cx) / span * inner,
                       r.center().y() - (f.y[i] - cy) / span * inner);
      const render::Rgb8 col = render::colormap_rgb8(render::Colormap::Viridis, f.position[i]);
      draw_marker(p, at, f.key[i] ? 2 : 0, QColor(col.r, col.g, col.b, 210), f.key[i] ? 1.9 : 1.6);
      c.mark(QRectF(at.x() - 0.5, at.y() - 0.5, 1, 1), r);
    }
  p.restore();
  c.rect_outline(r);
  draw_colorbar(c, QRectF(r.right() + kColorbarGap, r.top(), kColorbarBar, side), cb, side);
  const double ly = r.bottom() + 6;
  draw_legend(c, {area.left(), ly}, area.width(), legend);
  (void)s;
  return ly + leg_h;
}

}  // namespace attn::fig
