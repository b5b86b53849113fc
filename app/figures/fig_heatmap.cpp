// Presets "heatmap" (one head) and "variants" (dense and each variant side by side, one shared
// colour scale).
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {

std::vector<QString> metric_segments(const HeatmapData& h) {
  // The head's own values, as the app's panel header and `analyze --json` print them.
  std::vector<QString> s;
  for (const std::string& seg : core::heatmap_header(h)) s.push_back(QString::fromStdString(seg));
  return s;
}

namespace {

// Cells the causal rule hides entirely (every key of the cell is after every query of it).
std::vector<bool> hidden_cells(const HeatmapData& h) {
  std::vector<bool> out;
  if (!h.causal) return out;
  out.resize(size_t(h.rows) * size_t(h.cols));
  const int offset = h.n_k - h.n_q;  // query i sits at position offset + i
  for (int y = 0; y < h.rows; ++y) {
    const int q_last = int((int64_t(y) + 1) * h.n_q / h.rows) - 1 + offset;
    for (int x = 0; x < h.cols; ++x) {
      const int k_first = int(int64_t(x) * h.n_k / h.cols);
      out[size_t(y) * size_t(h.cols) + size_t(x)] = k_first > q_last;
    }
  }
  return out;
}

double max_label_width(const FigurePainter& c, const std::vector<std::string>& labels,
                       const std::vector<int>& shown, double pt) {
  double w = 0;
  for (int i : shown) w = std::max(w, c.text_width(token_label(labels[size_t(i)]), pt));
  return w;
}

constexpr double kGap = 12;         // between panels
constexpr double kRowGap = 8;       // between rows of panels
constexpr double kMaxAspect = 1.5;  // on a page with room to spare, maps grow up to this tall

// Where everything of one arrangement goes.
struct Layout {
  int ncol = 1, nrow = 1;
  double map_w = 0, map_h = 0;           // each map
  double left = 0, top = 0, bottom = 0;  // around each map: label column, caption, under it
  double ylab_w = 0, xlab_h = 0, cbw = 0;
  std::vector<int> qs, ks;  // token labels shown
  std::vector<QString> qtitle, ktitle;
  std::vector<Caption> caps;
  std::vector<std::vector<QString>> metrics;
  double block_w() const { return left + ncol * map_w + (ncol - 1) * kGap + kColorbarGap + cbw; }
  double block_h() const { return nrow * (top + map_h + bottom) + (nrow - 1) * kRowGap; }
  // The "Query token" title (and the colour bar's) may reach past the map into the caption and
  // key-label rows beside it.
  double qtitle_room() const { return map_h + 2 * std::min(top, bottom); }
};

Layout arrange(const FigurePainter& c, const QRectF& area, const FigureData& d, const Colorbar& cb,
               int ncol) {
  const FigureStyle& s = c.style();
  const auto& maps = d.heatmaps;
  const HeatmapData& m0 = maps.front();
  const int K = int(maps.size());
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  Layout L;
  L.ncol = ncol;
  L.nrow = (K + ncol - 1) / ncol;
  const bool free = c.free_height();
  // A first guess, then the labels, captions and metrics that size implies, three times over.
  double side = std::max(8.0, std::min((area.width() - 100 - (ncol - 1) * kGap) / ncol,
                                       free ? 1e9 : (area.height() - L.nrow * 90) / L.nrow));
  L.map_w = L.map_h = side;
  for (int it = 0; it < 4; ++it) {
    L.qs = thinned(m0.n_q, L.map_h, lh_tick * 1.05);
    L.ks = thinned(m0.n_k, L.map_w, lh_tick * 1.05);
    L.ylab_w = max_label_width(c, m0.q_labels, L.qs, s.tick_pt);
    L.xlab_h = max_label_width(c, m0.k_labels, L.ks, s.tick_pt);
    const double room = L.map_w + kGap - 3;
    L.ktitle = wrap_text(c, "Key token", s.label_pt, room);
    L.caps.clear();
    L.metrics.clear();
    double cap_h = 0;
    size_t met = 0;
    for (const HeatmapData& h : maps) {
      L.caps.push_back(make_caption(c, h.spec, "softmax over all keys", room));
      cap_h = std::max(cap_h, caption_height(c, L.caps.back()));
      L.metrics.push_back(wrap_segments(c, metric_segments(h), s.tick_pt, room));
      met = std::max(met, L.metrics.back().size());
    }
    L.top = cap_h;
    L.bottom = lh_tick / 2 + 1.5 + L.xlab_h + 3 + L.ktitle.size() * lh_label + 3 + met * lh_tick;
    L.qtitle = wrap_text(c, "Query token", s.label_pt, L.qtitle_room());
    L.left = L.qtitle.size() * lh_label + 3 + L.ylab_w + 4;
    L.cbw = colorbar_width(c, cb, L.map_h, L.qtitle_room());
    const double by_width =
        (area.width() - L.left - kColorbarGap - L.cbw - (ncol - 1) * kGap) / ncol;
    const double by_height =
        free ? 1e9
             : (area.height() - L.nrow * (L.top + L.bottom) - (L.nrow - 1) * kRowGap) / L.nrow;
    L.map_w = std::max(4.0, std::min(by_width, by_height));
    L.map_h = free ? L.map_w : std::max(4.0, std::min(by_height, L.map_w * kMaxAspect));
  }
  return L;
}

}  // namespace

double paint_heatmaps(FigurePainter& c, const QRectF& area_in, const FigureData& d) {
  const FigureStyle& s = c.style();
  const auto& maps = d.heatmaps;
  if (maps.empty()) return area_in.top();
  const int K = int(maps.size());
  // A legend under the maps for the cells that are no probability: dropped by a variant (a
  // colour outside the map) and hidden by the causal rule.
  bool any_dropped = false, any_hidden = false;
  for (const HeatmapData& h : maps) {
    any_dropped = any_dropped || !h.dropped.empty();
    any_hidden = any_hidden || h.causal;
  }
  std::vector<LegendItem> legend;
  if (any_dropped)
    legend.push_back({LegendItem::Swatch, kDropped, 0, "dropped by the variant (not attended)"});
  if (any_hidden && any_dropped)
    legend.push_back({LegendItem::Swatch, kHidden, 0, "after the query (causal)"});
  const double legend_h =
      legend.empty() ? 0 : draw_legend(c, {0, 0}, area_in.width(), legend, false) + 6;
  const QRectF area = c.free_height() ? area_in : area_in.adjusted(0, 0, 0, -legend_h);

  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    vmax = 0;
    for (const auto& h : maps)
      for (float v : h.cells) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const Colorbar cb{render::colormap_from_name(d.settings.colormap), vmax, d.settings.log_scale,
                    d.settings.log_scale ? "Attention probability (log)" : "Attention probability"};
  const int ncol = choose_columns(c, K, [&](int n) {
    const Layout l = arrange(c, area, d, cb, n);
    return l.map_w * l.map_h;
  });
  const Layout L = arrange(c, area, d, cb, ncol);
  const double x0 = area.left() + std::max(0.0, (area.width() - L.block_w()) / 2);
  const double y0 =
      area.top() + (c.free_height() ? 0 : std::max(0.0, (area.height() - L.block_h()) / 2));
  const double room = L.map_w + kGap - 3;
  const double xlab_y = c.line_height(s.tick_pt) / 2 + 0.5;  // clear of the last query label

  for (int k = 0; k < K; ++k) {
    const HeatmapData& h = maps[size_t(k)];
    const int col = k % L.ncol, row = k / L.ncol;
    const QRectF r(x0 + L.left + col * (L.map_w + kGap),
                   y0 + row * (L.top + L.map_h + L.bottom + kRowGap) + L.top, L.map_w, L.map_h);
    // Variant name and parameters above the map, its metrics under the key axis.
    draw_caption(c, {r.left(), r.top() - L.top}, room, L.caps[size_t(k)]);
    CellSource src{h.rows, h.cols, &h.cells, hidden_cells(h), h.dropped};
    draw_cells(c, r, src, cb.cmap, vmax, d.settings.log_scale);
    c.rect_outline(r);
    // Token labels: queries on the left of each row's first map, keys under every map.
    const double qh = L.map_h / h.n_q, kw = L.map_w / h.n_k;
    if (col == 0) {
      for (int i : L.qs) {
        const double y = r.top() + (i + 0.5) * qh;
        c.line({r.left() - 2, y}, {r.left(), y});
        c.text({r.left() - 3, y}, token_label(h.q_labels[size_t(i)]), s.tick_pt, 1, 0, kText, false,
               0, L.ylab_w);
      }
      draw_vertical_lines(c, {r.left() - L.left, r.center().y()}, L.qtitle, s.label_pt, kText,
                          L.qtitle_room());
    }
    for (int j : L.ks) {
      const double x = r.left() + (j + 0.5) * kw;
      c.line({x, r.bottom()}, {x, r.bottom() + 2});
      c.text({x, r.bottom() + xlab_y}, token_label(h.k_labels[size_t(j)]), s.tick_pt, 1, 0, kText,
             false, -90, L.xlab_h);
    }
    const double yk = r.bottom() + xlab_y + 1 + L.xlab_h + 3;
    const double kt =
        draw_lines(c, {r.center().x(), yk}, L.ktitle, s.label_pt, 0, kText, false, room);
    draw_lines(c, {r.center().x(), yk + kt + 3}, L.metrics[size_t(k)], s.tick_pt, 0, kMuted, false,
               room);
  }
  // One colour bar for all panels, as tall as a map, beside the first row.
  const QRectF bar(x0 + L.left + L.ncol * L.map_w + (L.ncol - 1) * kGap + kColorbarGap, y0 + L.top,
                   kColorbarBar, L.map_h);
  draw_colorbar(c, bar, cb, L.qtitle_room());
  if (legend.empty()) return y0 + L.block_h();
  const double ly = y0 + L.block_h() + 6;
  draw_legend(c, {x0 + L.left, ly}, std::max(40.0, area_in.right() - x0 - L.left), legend);
  return ly + legend_h - 6;
}

}  // namespace attn::fig
