// Preset "attribution": what each method says the target depended on, side by side. Text: one
// row per method over the tokens the target can depend on; images: the input with each method's
// patch scores over it. Colours are signed (red for the target, blue against it), each method
// scaled by its largest |score|. Below: the methods' rank agreement (Spearman) and, when
// measured, the deletion curves of the target's probability against random orders.
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "app/figures/plot_axis.h"
#include "app/figures/presets.h"

namespace attn::fig {
namespace {

using core::AttributionFigure;

constexpr double kGap = 10, kSectionGap = 12;

// Each method's scores scaled to [-1, 1] by its largest |score|, as colour positions in [0, 1].
std::vector<float> positions(const AttributionFigure& a) {
  std::vector<float> out;
  for (const std::vector<float>& s : a.scores) {
    float m = 0;
    for (float v : s)
      if (std::isfinite(v)) m = std::max(m, std::abs(v));
    for (float v : s) out.push_back(m > 0 && std::isfinite(v) ? 0.5f + 0.5f * v / m : 0.5f);
  }
  return out;
}

QColor diverging(double pos, int alpha = 255) {
  const render::Rgb8 c = render::colormap_rgb8(render::Colormap::Diverging, float(pos));
  return QColor(c.r, c.g, c.b, alpha);
}

double label_column(const FigurePainter& c, const AttributionFigure& a) {
  double w = 0;
  for (const std::string& m : a.methods) w = std::max(w, c.text_width(qs(m), c.style().tick_pt));
  return w + 4;
}

// Text: rows of coloured cells, the method ids left of them and the tokens below.
double paint_rows(FigurePainter& c, const QRectF& area, double y, const AttributionFigure& a) {
  const FigureStyle& s = c.style();
  const int M = int(a.methods.size()), U = int(a.labels.size());
  const double lw = label_column(c, a), lh = c.line_height(s.tick_pt);
  const double width = area.width() - lw;
  const double rh = std::max(lh + 2, 9.0);
  const QRectF r(area.left() + lw, y, width, rh * M);
  const std::vector<float> pos = positions(a);
  draw_cells(c, r, {M, U, &pos, {}, {}}, render::Colormap::Diverging, 1.0, false);
  c.rect_outline(r);
  for (int m = 0; m < M; ++m)
    c.text({r.left() - 3, r.top() + (m + 0.5) * rh}, qs(a.methods[size_t(m)]), s.tick_pt, 1, 0,
           kText, false, 0, lw - 3);
  const double cw = width / std::max(1, U);
  const std::vector<int> shown = thinned(U, width, lh * 1.05);
  double lab = 0;
  for (int u : shown)
    lab = std::max(lab, c.text_width(token_label(a.labels[size_t(u)]), s.tick_pt));
  for (int u : shown) {
    const double x = r.left() + (u + 0.5) * cw;
    c.line({x, r.bottom()}, {x, r.bottom() + 2});
    c.text({x, r.bottom() + 3}, token_label(a.labels[size_t(u)]), s.tick_pt, 1, 0, kText, false,
           -90, lab);
  }
  return r.bottom() + 3 + lab;
}

void draw_grey(FigurePainter& c, const QRectF& r, const AttributionFigure& a) {
  QImage q(a.image_w, a.image_h, QImage::Format_RGB32);
  for (int y = 0; y < a.image_h; ++y)
    for (int x = 0; x < a.image_w; ++x) {
      const int v =
          int(std::lround(255 * std::clamp(a.pixels[size_t(y) * a.image_w + x], 0.0f, 1.0f)));
      q.setPixel(x, y, qRgb(v, v, v));
    }
  QPainter& p = c.painter();
  p.save();
  p.setRenderHint(QPainter::Antialiasing, false);
  p.setRenderHint(QPainter::SmoothPixmapTransform, false);
  p.drawImage(r, q);
  p.restore();
}

// Images: small multiples of the input with each method's patches over it.
double paint_panels(FigurePainter& c, const QRectF& area, double y, const AttributionFigure& a) {
  const FigureStyle& s = c.style();
  const int M = int(a.methods.size());
  const double aspect = double(a.image_h) / std::max(1, a.image_w);
  const int ncol = std::max(1, std::min(M, c.free_height() ? 5 : 5));
  const double pw = std::min(110.0, (area.width() - (ncol - 1) * kGap) / ncol);
  const double ph = pw * aspect;
  const std::vector<float> pos = positions(a);
  const int U = a.grid_h * a.grid_w;
  double top = 0;
  std::vector<std::vector<QString>> caps;
  for (const std::string& m : a.methods) {
    caps.push_back(wrap_text(c, qs(m), s.tick_pt, pw + kGap - 3));
    top = std::max(top, caps.back().size() * c.line_height(s.tick_pt) + 2);
  }
  const int nrow = (M + ncol - 1) / ncol;
  for (int m = 0; m < M; ++m) {
    const int col = m % ncol, row = m / ncol;
    const QRectF r(area.left() + col * (pw + kGap), y + top + row * (top + ph + kGap), pw, ph);
    draw_lines(c, {r.left(), r.top() - top}, caps[size_t(m)], s.tick_pt, -1, kText, false,
               pw + kGap - 3);
    draw_grey(c, r, a);
    const double cw = pw / a.grid_w, ch = ph / a.grid_h;
    QPainter& p = c.painter();
    p.save();
    p.setRenderHint(QPainter::Antialiasing, false);
    for (int u = 0; u < U; ++u)
      p.fillRect(QRectF(r.left() + (u % a.grid_w) * cw, r.top() + (u / a.grid_w) * ch, cw, ch),
                 diverging(pos[size_t(m) * U + u], 170));
    p.restore();
    c.rect_outline(r);
  }
  return y + nrow * (top + ph) + (nrow - 1) * kGap;
}

// Spearman's rho of each pair, numbers in the cells.
double paint_agreement(FigurePainter& c, const QRectF& box, const AttributionFigure& a) {
  const FigureStyle& s = c.style();
  const int M = int(a.methods.size());
  const double lw = label_column(c, a), lh = c.line_height(s.tick_pt);
  double lab = 0;
  for (const std::string& m : a.methods) lab = std::max(lab, c.text_width(qs(m), s.tick_pt));
  const double title_h =
      draw_lines(c, box.topLeft(),
                 wrap_text(c, "Rank agreement (Spearman)", s.label_pt, box.width(), true),
                 s.label_pt, -1, kText, true, box.width()) +
      3;
  const double cell = std::max(lh + 1, std::min((box.width() - lw) / M, 26.0));
  const QRectF r(box.left() + lw, box.top() + title_h, cell * M, cell * M);
  QPainter& p = c.painter();
  const bool numbers = c.text_width("-0.00", s.tick_pt * 0.85) < cell * 0.9;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < M; ++j) {
      const double v = a.spearman[size_t(i) * M + j];
      const QRectF cr(r.left() + j * cell, r.top() + i * cell, cell, cell);
      p.fillRect(cr, std::isfinite(v) ? diverging(0.5 + 0.5 * v) : kHidden);
      if (numbers && std::isfinite(v))
        c.text(cr.center(), num_fixed(v, 2), s.tick_pt * 0.85, 0, 0,
               std::abs(v) > 0.6 ? QColor(Qt::white) : kText, false, 0, cell);
    }
  c.rect_outline(r);
  for (int i = 0; i < M; ++i) {
    c.text({r.left() - 3, r.top() + (i + 0.5) * cell}, qs(a.methods[size_t(i)]), s.tick_pt, 1, 0,
           kText, false, 0, lw - 3);
    c.text({r.left() + (i + 0.5) * cell, r.bottom() + 3}, qs(a.methods[size_t(i)]), s.tick_pt, 1, 0,
           kText, false, -90, lab);
  }
  return r.bottom() + 3 + lab;
}

// Deletion curves of p: x the fraction of units removed, one line per order.
double paint_curves(FigurePainter& c, const QRectF& box, const AttributionFigure& a) {
  const FigureStyle& s = c.style();
  const double lh = c.line_height(s.tick_pt), lhl = c.line_height(s.label_pt);
  const double title_h = draw_lines(
      c, box.topLeft(),
      wrap_text(c, "Deletion: p(target) as units are removed", s.label_pt, box.width(), true),
      s.label_pt, -1, kText, true, box.width());
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < a.curve_names.size(); ++i) {
    const bool random = a.curve_names[i] == "random";
    legend.push_back({random || i >= 8 ? LegendItem::Dashed : LegendItem::Swatch,
                      random ? kMuted : series_color(int(i)), 0,
                      qs(a.curve_names[i]) + " " + num_fixed(a.aopc[i], 3)});
  }
  const double leg_h = draw_legend(c, {box.left(), 0}, box.width(), legend, false);
  double ymax = 0;
  for (const auto& curve : a.p_deletion)
    for (float v : curve) ymax = std::max(ymax, double(v));
  const std::vector<double> yt = cover_ticks(0, ymax > 0 ? ymax : 1, 5);
  double ytw = 0;
  for (double t : yt) ytw = std::max(ytw, c.text_width(tick_label(t), s.tick_pt));
  const double left = box.left() + lhl + 3 + ytw + 4;
  const double top = box.top() + title_h + lh / 2 + 4;
  const double h = std::max(60.0, std::min(box.width() * 0.55, 140.0));
  const QRectF r(left, top, box.right() - left - 2, h);
  const double y_hi = yt.back();
  auto X = [&](double f) { return r.left() + f * r.width(); };
  auto Y = [&](double v) { return r.bottom() - v / y_hi * r.height(); };
  for (double t : yt) {
    c.line({r.left() - 2, Y(t)}, {r.left(), Y(t)});
    c.text({r.left() - 3, Y(t)}, tick_label(t), s.tick_pt, 1, 0, kText, false, 0, ytw);
  }
  for (double t : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    c.line({X(t), r.bottom()}, {X(t), r.bottom() + 2});
    c.text({X(t), r.bottom() + 3}, tick_label(t), s.tick_pt, 0, -1);
  }
  c.rect_outline(r);
  draw_vertical_lines(c, {box.left(), r.center().y()}, {"p(target)"}, s.label_pt, kText,
                      r.height());
  QPainter& p = c.painter();
  p.save();
  p.setClipRect(r.adjusted(-1, -1, 1, 1));
  for (size_t i = 0; i < a.p_deletion.size(); ++i) {
    const bool random = a.curve_names[i] == "random";
    QPen pen(random ? kMuted : series_color(int(i)), 1.0);
    if (random || i >= 8) pen.setStyle(Qt::DashLine);  // colours repeat after 8 series
    p.setPen(pen);
    QPainterPath path;
    for (size_t k = 0; k < a.p_deletion[i].size(); ++k) {
      const QPointF pt(X(a.fractions[k]), Y(a.p_deletion[i][k]));
      if (k == 0)
        path.moveTo(pt);
      else
        path.lineTo(pt);
    }
    p.drawPath(path);
  }
  p.restore();
  const double xt = r.bottom() + 3 + lh + 2;
  c.text({r.center().x(), xt}, "fraction of units removed (each method's order)", s.label_pt, 0, -1,
         kText, false, 0, r.width());
  const double ly = xt + lhl + 4;
  draw_legend(c, {box.left(), ly}, box.width(), legend);
  return ly + leg_h;
}

// The whole figure at its natural height from area's top; returns the lowest y drawn at.
double layout_all(FigurePainter& c, const QRectF& area, const AttributionFigure& a) {
  const FigureStyle& s = c.style();
  double y = area.top();
  const std::vector<QString> head =
      wrap_text(c,
                "Target: " + qs(a.target) +
                    ". Red: towards the target, blue: against it; each method "
                    "scaled by its largest |score|.",
                s.tick_pt, area.width());
  y += draw_lines(c, {area.left(), y}, head, s.tick_pt, -1, kMuted, false, area.width()) + 6;
  y = a.image ? paint_panels(c, area, y, a) : paint_rows(c, area, y, a);
  y += kSectionGap;
  const bool curves = !a.p_deletion.empty();
  const bool stacked = curves && area.width() < 420;  // a column: one above the other
  const double split = curves && !stacked ? area.width() * 0.42 : area.width();
  const double y1 = paint_agreement(c, QRectF(area.left(), y, split - kGap, 0), a);
  if (!curves) return y1 + 4;
  const double y2 =
      stacked ? paint_curves(c, QRectF(area.left(), y1 + kSectionGap, area.width(), 0), a)
              : paint_curves(c, QRectF(area.left() + split, y, area.width() - split, 0), a);
  return std::max(y1, y2) + 4;
}

}  // namespace

double paint_attribution(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const AttributionFigure& a = d.attribution;
  if (a.methods.empty()) return area.top();
  if (c.free_height()) return layout_all(c, area, a);
  // On a page: laid out at its natural height, then scaled down as a whole when that is taller
  // than the page allows (every text stays whole, only smaller).
  QImage probe(1, 1, QImage::Format_RGB32);
  const QPaintDevice* dev = c.painter().device();
  const double dpi = dev ? dev->logicalDpiX() : 300;
  const int dpm = int(std::lround(dpi / 0.0254));
  probe.setDotsPerMeterX(dpm);
  probe.setDotsPerMeterY(dpm);
  QPainter pp(&probe);
  pp.scale(dpi / 72.0, dpi / 72.0);
  FigurePainter measure(pp, c.style(), nullptr, true);
  const double h = layout_all(measure, QRectF(0, 0, area.width(), 0), a);
  pp.end();
  if (h <= area.height()) return layout_all(c, area, a);
  const double k = area.height() / h;
  QPainter& p = c.painter();
  p.save();
  p.translate(area.left() + area.width() * (1 - k) / 2, area.top());
  p.scale(k, k);
  layout_all(c, QRectF(0, 0, area.width(), 0), a);
  p.restore();
  return area.top() + h * k;
}

}  // namespace attn::fig
