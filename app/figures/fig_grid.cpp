// Preset "grid": one metric per (layer, head) for dense and every variant, values in the cells.
#include <algorithm>
#include <cmath>

#include "app/core/heads/head_metrics.h"
#include "app/figures/presets.h"

namespace attn::fig {
namespace {

constexpr double kGap = 14;      // between panels
constexpr double kRowGap = 8;    // between rows of panels
constexpr double kMaxCell = 40;  // cells never grow past this (points)

struct Layout {
  int ncol = 1, nrow = 1;
  double cell = 0, left = 0, top = 0, bottom = 0, cbw = 0, ylab_w = 0;
  int L = 0, H = 0;
  std::vector<Caption> caps;
  std::vector<QString> htitle, ltitle;
  double gw() const { return cell * H; }
  double gh() const { return cell * L; }
  // The "Layer" title (and the colour bar's) may reach past the grid into the caption and
  // head-label rows beside it.
  double ltitle_room() const { return gh() + 2 * std::min(top, bottom); }
  double block_w() const { return left + ncol * gw() + (ncol - 1) * kGap + kColorbarGap + cbw; }
  double block_h() const { return nrow * (top + gh() + bottom) + (nrow - 1) * kRowGap; }
};

Layout arrange(const FigurePainter& c, const QRectF& area, const FigureData& d, const Colorbar& cb,
               int ncol) {
  const FigureStyle& s = c.style();
  const int K = int(d.grids.size());
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  Layout l;
  l.L = d.grids.front().n_layers;
  l.H = d.grids.front().n_heads;
  l.ncol = ncol;
  l.nrow = (K + ncol - 1) / ncol;
  l.ylab_w = c.text_width(QString::number(l.L - 1), s.tick_pt);
  l.cell = std::min(kMaxCell, (area.width() - 100 - (ncol - 1) * kGap) / (ncol * l.H));
  const bool free = c.free_height();
  for (int it = 0; it < 3; ++it) {
    const double room = l.gw() + kGap - 3;
    l.caps.clear();
    double cap_h = 0;
    for (const HeadGrid& g : d.grids) {
      l.caps.push_back(make_caption(c, g.spec, "softmax over all keys", room));
      cap_h = std::max(cap_h, caption_height(c, l.caps.back()));
    }
    l.htitle = wrap_text(c, "Head", s.label_pt, room);
    l.top = cap_h;
    l.bottom = 3 + lh_tick + 3 + l.htitle.size() * lh_label;
    l.ltitle = wrap_text(c, "Layer", s.label_pt, l.ltitle_room());
    l.left = l.ltitle.size() * lh_label + 4 + l.ylab_w + 4;
    l.cbw = colorbar_width(c, cb, l.gh(), l.ltitle_room());
    const double by_width =
        (area.width() - l.left - kColorbarGap - l.cbw - (ncol - 1) * kGap) / (ncol * l.H);
    const double by_height =
        free ? 1e9
             : (area.height() - l.nrow * (l.top + l.bottom) - (l.nrow - 1) * kRowGap) /
                   (l.nrow * l.L);
    l.cell = std::max(1.0, std::min({kMaxCell, by_width, by_height}));
  }
  return l;
}

QString cell_text(float x) {
  return std::isfinite(x) ? num_fixed(x, std::abs(x) < 10 ? 2 : 1) : "\u2013";
}

}  // namespace

double paint_head_grids(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  if (d.grids.empty()) return area.top();
  const std::string& metric = d.settings.grid_metric;
  const int K = int(d.grids.size());
  // Metrics are not probabilities: always a linear scale from 0.
  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    for (const HeadGrid& g : d.grids)
      for (float v : g.metric(metric))
        if (std::isfinite(v)) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const Colorbar cb{render::colormap_from_name(d.settings.colormap), vmax, false,
                    qs(core::head_metric_title(metric))};
  const double lh_tick = c.line_height(s.tick_pt);
  const int ncol = choose_columns(c, K, [&](int n) { return arrange(c, area, d, cb, n).cell; });
  const Layout l = arrange(c, area, d, cb, ncol);
  const int L = l.L, H = l.H;
  const double cell = l.cell, gw = l.gw(), gh = l.gh();
  const double x0 = area.left() + std::max(0.0, (area.width() - l.block_w()) / 2);
  const double y0 =
      area.top() + (c.free_height() ? 0 : std::max(0.0, (area.height() - l.block_h()) / 2));
  const double room = gw + kGap - 3;
  // Numbers inside the cells when they are legible: sized so the widest fits its cell.
  double value_pt = std::min(s.tick_pt, cell * 0.32);
  double widest = 0;
  for (const HeadGrid& g : d.grids)
    for (float x : g.metric(metric))
      widest = std::max(widest, c.text_width(cell_text(x), value_pt));
  if (widest > cell * 0.86) value_pt *= cell * 0.86 / widest;
  const std::vector<int> hs = thinned(H, gw, c.text_width(QString::number(H - 1) + "0", s.tick_pt));
  const std::vector<int> ls = thinned(L, gh, lh_tick * 1.1);

  for (int k = 0; k < K; ++k) {
    const HeadGrid& g = d.grids[size_t(k)];
    const std::vector<float>& v = g.metric(metric);
    const int col = k % ncol, row = k / ncol;
    const QRectF r(x0 + l.left + col * (gw + kGap),
                   y0 + row * (l.top + gh + l.bottom + kRowGap) + l.top, gw, gh);
    draw_caption(c, {r.left(), r.top() - l.top}, room, l.caps[size_t(k)]);
    CellSource src{L, H, &v, {}, {}};
    draw_cells(c, r, src, cb.cmap, vmax, false);
    c.rect_outline(r);
    if (value_pt >= 4.0) {
      for (int y = 0; y < L; ++y)
        for (int h = 0; h < H; ++h) {
          const float x = v[size_t(y) * size_t(H) + size_t(h)];
          const render::Rgb8 bg =
              render::colormap_rgb8(cb.cmap, render::color_position(x, vmax, false));
          const double lum = 0.2126 * bg.r + 0.7152 * bg.g + 0.0722 * bg.b;
          c.text({r.left() + (h + 0.5) * cell, r.top() + (y + 0.5) * cell}, cell_text(x), value_pt,
                 0, 0, lum > 140 ? kText : QColor(Qt::white), false, 0, cell);
        }
    }
    for (int h : hs) {
      const double x = r.left() + (h + 0.5) * cell;
      c.line({x, r.bottom()}, {x, r.bottom() + 2});
      c.text({x, r.bottom() + 3}, QString::number(h), s.tick_pt, 0, -1);
    }
    draw_lines(c, {r.center().x(), r.bottom() + 3 + lh_tick + 3}, l.htitle, s.label_pt, 0, kText,
               false, room);
    if (col == 0) {
      for (int y : ls) {
        const double yy = r.top() + (y + 0.5) * cell;
        c.line({r.left() - 2, yy}, {r.left(), yy});
        c.text({r.left() - 3, yy}, QString::number(y), s.tick_pt, 1, 0);
      }
      draw_vertical_lines(c, {r.left() - l.left, r.center().y()}, l.ltitle, s.label_pt, kText,
                          l.ltitle_room());
    }
  }
  const QRectF bar(x0 + l.left + ncol * gw + (ncol - 1) * kGap + kColorbarGap, y0 + l.top,
                   kColorbarBar, gh);
  draw_colorbar(c, bar, cb, l.ltitle_room());
  return y0 + l.block_h();
}

}  // namespace attn::fig
