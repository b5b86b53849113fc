// Preset "image": the input image, then the CLS token's attention over the patches as a
// translucent colour overlay, for dense softmax and each variant (one shared colour scale).
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {
namespace {

// The image in grey or colour, as rectangles (vector) when small, else one embedded image.
void draw_image(FigurePainter& c, const QRectF& r, const Image8& im) {
  QImage q(im.width, im.height, QImage::Format_RGB32);
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) {
      const uint8_t* px = im.data.data() + (size_t(y) * im.width + x) * im.channels;
      q.setPixel(x, y, im.channels == 1 ? qRgb(px[0], px[0], px[0]) : qRgb(px[0], px[1], px[2]));
    }
  QPainter& p = c.painter();
  p.save();
  p.setRenderHint(QPainter::Antialiasing, false);
  if (int64_t(im.width) * im.height <= c.style().max_rect_cells) {
    const double cw = r.width() / im.width, ch = r.height() / im.height;
    for (int y = 0; y < im.height; ++y)
      for (int x = 0; x < im.width; ++x)
        p.fillRect(QRectF(r.left() + x * cw, r.top() + y * ch, cw * 1.02, ch * 1.02),
                   QColor(q.pixel(x, y)));
  } else {
    p.setRenderHint(QPainter::SmoothPixmapTransform, true);
    p.drawImage(r, q);
  }
  p.restore();
}

}  // namespace

double paint_images(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  if (d.images.empty()) return area.top();
  const ImageAttention& a0 = d.images.front();
  const int K = int(d.images.size()) + 1;  // the plain input first
  const render::Colormap cmap = render::colormap_from_name(d.settings.colormap);
  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    for (const auto& a : d.images)
      for (float v : a.cls) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  const double cbw = colorbar_width(c), gap = 10;
  const double top = caption_height(c) + 2;
  const double aspect = double(a0.image.height) / std::max(1, a0.image.width);
  const int ncol = K <= 5 ? K : (K + 1) / 2, nrow = (K + ncol - 1) / ncol;
  const double pw = std::max(10.0, std::min((area.width() - cbw - 10 - (ncol - 1) * gap) / ncol,
                                            (area.height() - nrow * (top + 4)) / nrow / aspect));
  const double ph = pw * aspect;
  const double block_w = ncol * pw + (ncol - 1) * gap + 10 + cbw;
  const double x0 = area.left() + std::max(0.0, (area.width() - block_w) / 2);
  for (int k = 0; k < K; ++k) {
    const int col = k % ncol, row = k / ncol;
    const QRectF r(x0 + col * (pw + gap), area.top() + top + row * (top + ph + 4), pw, ph);
    draw_image(c, r, a0.image);
    if (k == 0) {
      c.text({r.left(), r.top() - top}, "Input", s.label_pt, -1, -1, kText, true);
      c.text({r.left(), r.top() - top + lh_label + 1},
             a0.predicted.empty() ? QString() : "predicted: " + qs(a0.predicted), s.tick_pt, -1, -1,
             kMuted);
    } else {
      const ImageAttention& a = d.images[size_t(k - 1)];
      draw_caption(c, {r.left(), r.top() - top}, pw + gap - 3, a.spec, "softmax over all keys");
      const double cw = pw / a.grid_w, ch = ph / a.grid_h;
      QPainter& p = c.painter();
      p.save();
      p.setRenderHint(QPainter::Antialiasing, false);
      for (int y = 0; y < a.grid_h; ++y)
        for (int x = 0; x < a.grid_w; ++x) {
          const render::Rgb8 col = render::colormap_rgb8(
              cmap,
              render::color_position(a.cls[size_t(y) * a.grid_w + x], vmax, d.settings.log_scale));
          p.fillRect(QRectF(r.left() + x * cw, r.top() + y * ch, cw, ch),
                     QColor(col.r, col.g, col.b, 165));
        }
      p.restore();
    }
    c.rect_outline(r);
  }
  const QRectF cb(x0 + ncol * pw + (ncol - 1) * gap + 10, area.top() + top, 8, ph);
  draw_colorbar(c, cb, cmap, vmax, d.settings.log_scale, "CLS attention");
  return area.top() + nrow * (top + ph + 4);
}

}  // namespace attn::fig
