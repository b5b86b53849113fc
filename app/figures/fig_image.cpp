// Preset "image": the input image, then the CLS token's attention over the patches as a
// translucent colour overlay, for dense softmax and each variant (one shared colour scale).
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {
namespace {

// The image in grey or colour, as rectangles (vector) when small, else one embedded image.
void draw_image(FigurePainter& c, const QRectF& r, const models::Image8& im) {
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

constexpr double kGap = 10, kRowGap = 6, kBottom = 4;

struct Layout {
  int ncol = 1, nrow = 1;
  double pw = 0, ph = 0, top = 0, cbw = 0;
  std::vector<Caption> caps;
  double block_w() const { return ncol * pw + (ncol - 1) * kGap + kColorbarGap + cbw; }
  double block_h() const { return nrow * (top + ph) + (nrow - 1) * kRowGap; }
  // The colour bar's title may reach past the bar into the caption row and the bottom margin.
  double title_room() const { return ph + 2 * std::min(top, kBottom); }
};

Layout arrange(const FigurePainter& c, const QRectF& area, const FigureData& d, const Colorbar& cb,
               int ncol) {
  const ImageAttention& a0 = d.images.front();
  const int K = int(d.images.size()) + 1;  // the plain input first
  const double aspect = double(a0.image.height) / std::max(1, a0.image.width);
  Layout l;
  l.ncol = ncol;
  l.nrow = (K + ncol - 1) / ncol;
  l.pw = std::max(10.0, (area.width() - 80 - (ncol - 1) * kGap) / ncol);
  for (int it = 0; it < 3; ++it) {
    const double room = l.pw + kGap - 3;
    l.caps = {text_caption(
        c, "Input", a0.predicted.empty() ? QString() : "predicted: " + qs(a0.predicted), room)};
    for (const ImageAttention& a : d.images)
      l.caps.push_back(make_caption(c, a.spec, "softmax over all keys", room));
    l.top = 0;
    for (const Caption& cap : l.caps) l.top = std::max(l.top, caption_height(c, cap));
    l.cbw = colorbar_width(c, cb, l.ph > 0 ? l.ph : l.pw * aspect, l.title_room());
    const double by_width = (area.width() - l.cbw - kColorbarGap - (ncol - 1) * kGap) / ncol;
    const double by_height =
        c.free_height()
            ? 1e9
            : (area.height() - l.nrow * l.top - (l.nrow - 1) * kRowGap) / l.nrow / aspect;
    l.pw = std::max(4.0, std::min(by_width, by_height));
    l.ph = l.pw * aspect;
  }
  return l;
}

}  // namespace

double paint_images(FigurePainter& c, const QRectF& area, const FigureData& d) {
  if (d.images.empty()) return area.top();
  const ImageAttention& a0 = d.images.front();
  const int K = int(d.images.size()) + 1;  // the plain input first
  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    for (const auto& a : d.images)
      for (float v : a.cls) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const Colorbar cb{render::colormap_from_name(d.settings.colormap), vmax, d.settings.log_scale,
                    "CLS attention"};
  const int ncol = choose_columns(c, K, [&](int n) { return arrange(c, area, d, cb, n).pw; });
  const Layout l = arrange(c, area, d, cb, ncol);
  const double x0 = area.left() + std::max(0.0, (area.width() - l.block_w()) / 2);
  const double y0 =
      area.top() + (c.free_height() ? 0 : std::max(0.0, (area.height() - l.block_h()) / 2));
  for (int k = 0; k < K; ++k) {
    const int col = k % ncol, row = k / ncol;
    const QRectF r(x0 + col * (l.pw + kGap), y0 + l.top + row * (l.top + l.ph + kRowGap), l.pw,
                   l.ph);
    draw_image(c, r, a0.image);
    draw_caption(c, {r.left(), r.top() - l.top}, l.pw + kGap - 3, l.caps[size_t(k)]);
    if (k > 0) {
      const ImageAttention& a = d.images[size_t(k - 1)];
      const double cw = l.pw / a.grid_w, ch = l.ph / a.grid_h;
      QPainter& p = c.painter();
      p.save();
      p.setRenderHint(QPainter::Antialiasing, false);
      for (int y = 0; y < a.grid_h; ++y)
        for (int x = 0; x < a.grid_w; ++x) {
          const render::Rgb8 col = render::colormap_rgb8(
              cb.cmap,
              render::color_position(a.cls[size_t(y) * a.grid_w + x], vmax, d.settings.log_scale));
          p.fillRect(QRectF(r.left() + x * cw, r.top() + y * ch, cw, ch),
                     QColor(col.r, col.g, col.b, 165));
        }
      p.restore();
    }
    c.rect_outline(r);
  }
  const QRectF bar(x0 + ncol * l.pw + (ncol - 1) * kGap + kColorbarGap, y0 + l.top, kColorbarBar,
                   l.ph);
  draw_colorbar(c, bar, cb, l.title_room());
  return y0 + l.block_h() + kBottom;
}

}  // namespace attn::fig
