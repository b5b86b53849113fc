// Presets "heatmap" (one head) and "variants" (dense and each variant side by side, one shared
// colour scale).
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {

std::vector<QString> metric_segments(const HeatmapData& h) {
  auto f = [](double x, int digits) { return QString::number(x, 'g', digits); };
  if (h.spec == "dense") return {"density " + f(h.density, 3), "exact reference"};
  std::vector<QString> s = {"density " + f(h.density, 3), "error " + f(h.rel_error, 2),
                            "recall " + f(h.mass_recall, 3)};
  if (std::isfinite(h.row_kl)) s.push_back("KL " + f(h.row_kl, 2));
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

}  // namespace

double paint_heatmaps(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const auto& maps = d.heatmaps;
  if (maps.empty()) return area.top();
  const int K = int(maps.size());
  const int ncol = K <= 4 ? K : (K + 1) / 2;
  const int nrow = (K + ncol - 1) / ncol;
  const HeatmapData& m0 = maps.front();

  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    vmax = 0;
    for (const auto& h : maps)
      for (float v : h.cells) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const render::Colormap cmap = render::colormap_from_name(d.settings.colormap);

  const double lh_tick = c.line_height(s.tick_pt);
  const double lh_label = c.line_height(s.label_pt);
  const double cbw = colorbar_width(c);
  const double gap = 12;
  // First pass with a guessed map size to know how many labels fit and how wide they are.
  double map = std::min((area.width() - cbw - 60 - (ncol - 1) * gap) / ncol,
                        (area.height() - nrow * 60) / nrow);
  std::vector<int> qs_shown, ks_shown;
  double ylab_w = 0, xlab_h = 0;
  for (int it = 0; it < 3; ++it) {
    qs_shown = thinned(m0.n_q, map, lh_tick * 1.05);
    ks_shown = thinned(m0.n_k, map, lh_tick * 1.05);
    ylab_w = std::min(max_label_width(c, m0.q_labels, qs_shown, s.tick_pt), 48.0);
    xlab_h = std::min(max_label_width(c, m0.k_labels, ks_shown, s.tick_pt), 48.0);
    const double left = lh_label + 3 + ylab_w + 4;
    const double top = caption_height(c) + 2;                               // name + parameters
    const double bottom = 4 + xlab_h + 3 + lh_label + 3 + 2 * lh_tick + 6;  // + 2 metric lines
    map = std::min((area.width() - left - cbw - 10 - (ncol - 1) * gap) / ncol,
                   (area.height() - nrow * (top + bottom)) / nrow);
    map = std::max(map, 20.0);
  }
  const double left = lh_label + 3 + ylab_w + 4;
  const double top = caption_height(c) + 2;
  const double bottom = 4 + xlab_h + 3 + lh_label + 3 + 2 * lh_tick + 6;
  // Labels for the final size (the reserved widths above bound them: longer ones are elided).
  qs_shown = thinned(m0.n_q, map, lh_tick * 1.05);
  ks_shown = thinned(m0.n_k, map, lh_tick * 1.05);
  const double block_w = left + ncol * map + (ncol - 1) * gap + 10 + cbw;
  const double x0 = area.left() + std::max(0.0, (area.width() - block_w) / 2);

  for (int k = 0; k < K; ++k) {
    const HeatmapData& h = maps[size_t(k)];
    const int col = k % ncol, row = k / ncol;
    const QRectF r(x0 + left + col * (map + gap), area.top() + row * (top + map + bottom) + top,
                   map, map);
    // Variant name and parameters above the map, its metrics under the key axis.
    draw_caption(c, {r.left(), r.top() - top}, map + gap - 3, h.spec, "softmax over all keys");
    CellSource src{h.rows, h.cols, &h.cells, hidden_cells(h)};
    draw_cells(c, r, src, cmap, vmax, d.settings.log_scale);
    c.rect_outline(r);
    // Token labels: queries on the left of the first column, keys under every map.
    const double qh = map / h.n_q, kw = map / h.n_k;
    if (col == 0) {
      for (int i : qs_shown) {
        const double y = r.top() + (i + 0.5) * qh;
        c.line({r.left() - 2, y}, {r.left(), y});
        c.text({r.left() - 3, y},
               c.elide(token_label(h.q_labels[size_t(i)]), s.tick_pt, ylab_w + 0.5), s.tick_pt, 1,
               0);
      }
      c.text({r.left() - 3 - ylab_w - 4, r.center().y()}, "Query token", s.label_pt, 0, 1, kText,
             false, -90);
    }
    for (int j : ks_shown) {
      const double x = r.left() + (j + 0.5) * kw;
      c.line({x, r.bottom()}, {x, r.bottom() + 2});
      c.text({x, r.bottom() + 3},
             c.elide(token_label(h.k_labels[size_t(j)]), s.tick_pt, xlab_h + 0.5), s.tick_pt, 1, 0,
             kText, false, -90);
    }
    const double yk = r.bottom() + 4 + xlab_h + 3;
    c.text({r.center().x(), yk}, "Key token", s.label_pt, 0, -1);
    const auto lines = wrap_segments(c, metric_segments(h), s.tick_pt, map + gap - 3, 2);
    for (size_t i = 0; i < lines.size(); ++i)
      c.text({r.center().x(), yk + lh_label + 3 + i * lh_tick}, lines[i], s.tick_pt, 0, -1, kMuted);
  }
  // One colour bar for all panels, as tall as a map, beside the first row.
  const QRectF cb(x0 + left + ncol * map + (ncol - 1) * gap + 10, area.top() + top, 8, map);
  draw_colorbar(c, cb, cmap, vmax, d.settings.log_scale,
                d.settings.log_scale ? "Attention probability (log)" : "Attention probability");
  return area.top() + nrow * (top + map + bottom) - 4;
}

}  // namespace attn::fig
