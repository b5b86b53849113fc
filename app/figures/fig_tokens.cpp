// Preset "tokens": the input text as token boxes shaded by the attention one query gives them,
// one paragraph per variant; the query token is outlined.
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {

double paint_tokens(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  if (d.tokens.empty()) return area.top();
  // Text backgrounds need a light low end: the default viridis becomes blues here.
  const render::Colormap cmap =
      render::colormap_from_name(d.settings.colormap == "viridis" ? "blues" : d.settings.colormap);
  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    for (const auto& t : d.tokens)
      for (float v : t.weight) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const double cbw = colorbar_width(c);
  const double width = area.width() - cbw - 14;
  const int K = int(d.tokens.size());
  const double lh_label = c.line_height(s.label_pt);
  // Token text a little larger than tick labels, so the paragraph reads as text.
  const double tok_pt = s.tick_pt + 0.5;
  const double box_h = c.line_height(tok_pt) + 2.5, row_gap = 2.2, pad = 1.6;
  // Each paragraph takes the rows it needs; when the area is too short, each gets an equal share
  // and says how many tokens it left out.
  auto rows_needed = [&](const TokensData& t) {
    double x = 0;
    int rows = 1;
    for (const std::string& l : t.labels) {
      const double w = c.text_width(token_label(l, 24), tok_pt) + 2 * pad;
      if (x + w > width && x > 0) {
        ++rows;
        x = 0;
      }
      x += w + 1.2;
    }
    return rows;
  };
  const double para_gap = 7;
  double natural = 0;
  for (const auto& t : d.tokens)
    natural += lh_label + 3 + rows_needed(t) * (box_h + row_gap) + para_gap;
  const bool fits = natural <= area.height();
  const double share = (area.height() - 2) / K;
  double top = area.top();
  for (int k = 0; k < K; ++k) {
    const TokensData& t = d.tokens[size_t(k)];
    const double block_h =
        fits ? lh_label + 3 + rows_needed(t) * (box_h + row_gap) + para_gap : share;
    c.text({area.left(), top}, c.elide(qs(t.caption), s.label_pt, width), s.label_pt, -1, -1, kText,
           true);
    double x = area.left(), y = top + lh_label + 3;
    for (size_t j = 0; j < t.labels.size(); ++j) {
      const QString lab = token_label(t.labels[j], 24);
      const double w = c.text_width(lab, tok_pt) + 2 * pad;
      if (x + w > area.left() + width && x > area.left()) {
        x = area.left();
        y += box_h + row_gap;
      }
      if (y + box_h > top + block_h - 2) {  // out of room: say how much was left out
        c.text({area.left() + width, top}, QString("(%1 more tokens)").arg(t.labels.size() - j),
               s.tick_pt, 1, -1, kMuted);
        break;
      }
      const double v = t.weight[j];
      const render::Rgb8 bg =
          render::colormap_rgb8(cmap, render::color_position(v, vmax, d.settings.log_scale));
      const QRectF box(x, y, w, box_h);
      const bool future = int(j) > t.query;
      c.painter().fillRect(box, future ? QColor(Qt::white) : QColor(bg.r, bg.g, bg.b));
      if (int(j) == t.query) c.rect_outline(box.adjusted(0.4, 0.4, -0.4, -0.4), kAccent, 1.0);
      const double lum = 0.2126 * bg.r + 0.7152 * bg.g + 0.0722 * bg.b;
      c.text({x + pad, y + box_h / 2}, lab, tok_pt, -1, 0,
             future      ? QColor(170, 170, 170)
             : lum > 120 ? kText
                         : QColor(Qt::white));
      x += w + 1.2;
    }
    top += block_h;
  }
  const double cb_h = std::clamp(std::min(area.height(), natural) - lh_label - 12, 40.0, 140.0);
  const QRectF cb(area.right() - cbw, area.top() + lh_label + 3, 8, cb_h);
  draw_colorbar(c, cb, cmap, vmax, d.settings.log_scale, "Attention from query");
  return std::max(top - para_gap, cb.bottom() + 4);
}

}  // namespace attn::fig
