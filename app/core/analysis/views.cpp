#include "app/core/analysis/views.h"

#include <algorithm>
#include <cmath>

#include "app/core/analysis/analysis.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/session/labels.h"
#include "compute/error.h"
#include "compute/layout.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "render/number_format.h"

namespace attn::core {
namespace {

const Panel& panel_at(const Analysis& a, int panel) {
  require(panel >= 0 && panel < int(a.panels.size()), ErrorCode::InvalidArgument,
          "panel " + std::to_string(panel) + " is out of range (" +
              std::to_string(a.panels.size()) + " panels: dense and each variant)");
  const Panel& p = a.panels[size_t(panel)];
  require(p.ran(), ErrorCode::InvalidArgument, p.spec + " has not run yet");
  return p;
}

void check_layer_head(const Analysis& a, int layer, int head, bool mean_ok) {
  require(layer >= 0 && layer < a.n_layers(), ErrorCode::InvalidArgument,
          "layer " + std::to_string(layer) + " is out of range: the input has " +
              std::to_string(a.n_layers()) + " layers (0.." + std::to_string(a.n_layers() - 1) +
              ")");
  require(head >= (mean_ok ? -1 : 0) && head < a.n_heads(), ErrorCode::InvalidArgument,
          "head " + std::to_string(head) + " is out of range: the input has " +
              std::to_string(a.n_heads()) + " heads (0.." + std::to_string(a.n_heads() - 1) + ")");
}

// The head's own metrics and sinks (NaN where per-head metrics were skipped: the density is then
// the layer's, as the kernel reports no other).
void head_values(const Panel& pn, int layer, int head, HeatmapData& h) {
  h.spec = pn.spec;
  if (!pn.heads.empty()) {
    const Metrics& m = pn.heads[size_t(layer)][size_t(head)];
    h.density = m.density;
    h.rel_error = m.rel_error;
    h.mass_recall = m.mass_recall;
    h.row_kl = m.row_kl;
    for (size_t j = 0; j < m.received.size(); ++j)
      if (m.received[j] > kSinkThreshold) h.sinks.push_back(int(j));
  } else {
    h.density = pn.result(layer).stats.density;
    h.rel_error = h.mass_recall = h.row_kl = kNaN;
  }
}

// Cells (of a rows x cols pooling of the n_q x n_k matrix) with visible entries of which the layout
// keeps none.
std::vector<uint8_t> dropped_cells(const Problem& p, const Layout& layout, int head, int rows,
                                   int cols) {
  if (layout.kind == Layout::Kind::Dense || rows <= 0 || cols <= 0) return {};
  std::vector<uint8_t> kept(size_t(rows) * size_t(cols), 0), visible(kept.size(), 0);
  std::vector<int32_t> keys;
  for (int y = 0; y < rows; ++y) {
    const int i0 = int(int64_t(y) * p.n_q / rows), i1 = int(int64_t(y + 1) * p.n_q / rows);
    for (int i = i0; i < i1; ++i) {
      for (int x = 0; x < cols; ++x) {
        uint8_t& v = visible[size_t(y) * cols + x];
        if (!v) v = p.visible(i, int(int64_t(x) * p.n_k / cols)) ? 1 : 0;
      }
      layout_row_keys(layout, p, head, i, keys);
      for (int32_t j : keys) kept[size_t(y) * cols + size_t(int64_t(j) * cols / p.n_k)] = 1;
    }
  }
  std::vector<uint8_t> out(kept.size(), 0);
  bool any = false;
  for (size_t c = 0; c < out.size(); ++c) {
    out[c] = visible[c] && !kept[c] ? 1 : 0;
    any = any || out[c];
  }
  if (!any) out.clear();
  return out;
}

}  // namespace

const std::vector<float>& HeadGrid::metric(const std::string& name) const {
  const int i = head_metric_index(name);
  require(size_t(i) < values.size(), ErrorCode::InvalidArgument,
          "head-grid metric '" + name + "' was not computed for " + spec);
  return values[size_t(i)];
}

HeatmapData heatmap(const Analysis& a, int panel, int layer, int head, int max_cells) {
  check_layer_head(a, layer, head, false);
  require(max_cells > 0, ErrorCode::InvalidArgument, "heatmap: max_cells must be > 0");
  const Panel& pn = panel_at(a, panel);
  const Problem& p = a.problem(layer);
  TileRequest t;
  t.head = head;
  t.q1 = p.n_q;
  t.k1 = p.n_k;
  t.w = std::min(p.n_k, max_cells);
  t.h = std::min(p.n_q, max_cells);
  t.pool = Pool::Max;
  Tile tile = tile_probabilities(*pn.variant, p, pn.result(layer), t);
  HeatmapData h;
  h.spec = pn.spec;
  h.caption = variant_caption(pn.spec);
  h.layer = layer;
  h.head = head;
  h.n_q = p.n_q;
  h.n_k = p.n_k;
  h.rows = tile.h;
  h.cols = tile.w;
  h.cells = std::move(tile.cells);
  h.k_labels = a.labels;
  h.q_labels.assign(a.labels.end() - p.n_q, a.labels.end());
  h.causal = p.causal;
  head_values(pn, layer, head, h);
  h.dropped = dropped_cells(p, pn.result(layer).layout, head, h.rows, h.cols);
  return h;
}

std::vector<std::string> heatmap_header(const Analysis& a, int panel, int layer, int head) {
  check_layer_head(a, layer, head, false);
  HeatmapData h;
  head_values(panel_at(a, panel), layer, head, h);
  return heatmap_header(h);
}

std::vector<std::string> heatmap_header(const HeatmapData& h) {
  using render::format_number;
  std::vector<std::string> s = {"density " + format_number(h.density, 3)};
  if (h.spec != "dense") {
    if (std::isfinite(h.rel_error)) s.push_back("error " + format_number(h.rel_error, 2, 1e-6));
    if (std::isfinite(h.mass_recall)) s.push_back("recall " + format_number(h.mass_recall, 3));
    // Row KL: this head's attention rows against dense (not the model's next-token KL).
    if (std::isfinite(h.row_kl)) s.push_back("row KL " + format_number(h.row_kl, 2, 1e-6));
  }
  s.push_back(std::to_string(h.sinks.size()) + (h.sinks.size() == 1 ? " sink" : " sinks"));
  if (h.spec == "dense") s.push_back("exact reference");
  return s;
}

std::vector<HeatmapData> heatmaps(const Analysis& a, int max_cells) {
  std::vector<HeatmapData> out;
  for (size_t v = 0; v < a.panels.size(); ++v)
    out.push_back(heatmap(a, int(v), a.layer(), a.head(), max_cells));
  return out;
}

SinkData sinks(const Analysis& a, int panel, double threshold) {
  const Panel& pn = panel_at(a, panel);
  require(a.has_metrics(), ErrorCode::InvalidArgument, "sinks: the comparisons have not run yet");
  SinkData s;
  s.spec = pn.spec;
  s.n_layers = a.n_layers();
  s.n = a.n_tokens();
  s.labels = a.labels;
  s.threshold = threshold;
  std::vector<bool> is_sink(size_t(s.n), false);
  for (int l = 0; l < s.n_layers; ++l) {
    const Metrics& m = pn.layer[size_t(l)];
    for (int j = 0; j < s.n; ++j) {
      const float r = j < int(m.sink_score.size()) ? m.sink_score[size_t(j)] : 0.0f;
      s.received.push_back(r);
      if (r > threshold) is_sink[size_t(j)] = true;
    }
  }
  for (int j = 0; j < s.n; ++j)
    if (is_sink[size_t(j)]) s.sinks.push_back(j);
  return s;
}

HeadGrid head_grid(const Analysis& a, int panel) {
  const Panel& pn = panel_at(a, panel);
  require(!pn.head_values.empty(), ErrorCode::InvalidArgument,
          "head grid: the comparisons have not run yet");
  HeadGrid g;
  g.spec = pn.spec;
  g.n_layers = a.n_layers();
  g.n_heads = a.n_heads();
  g.metrics = head_metric_names();
  g.values = pn.head_values;
  return g;
}

TradeoffPoint tradeoff_point(const Analysis& a, int panel) {
  TradeoffPoint t = tradeoff_values(a, panel);
  t.caption = variant_caption(t.spec);
  t.pattern = spec_family_id(t.spec);
  if (t.precision != "f32") t.caption += " \u00b7 " + t.precision;  // tells points apart
  return t;
}

TradeoffPoint tradeoff_values(const Analysis& a, int panel) {
  const Panel& pn = panel_at(a, panel);
  require(a.has_metrics(), ErrorCode::InvalidArgument,
          "trade-off: the comparisons have not run yet");
  TradeoffPoint t;
  t.spec = pn.spec;
  const int L = a.n_layers();
  double density = 0, err = 0, recall = 0, kl = 0;
  bool kl_ok = true;
  for (int l = 0; l < L; ++l) {
    const Metrics& m = pn.layer[size_t(l)];
    density += m.density / L;
    err += m.rel_error / L;
    recall += m.mass_recall / L;
    if (std::isfinite(m.row_kl))
      kl += m.row_kl / L;
    else
      kl_ok = false;
    t.flops += pn.result(l).stats.counted.flops;
    t.select_seconds += pn.result(l).stats.select_seconds;
    t.kernel_seconds += pn.result(l).stats.kernel_seconds;
  }
  if (L > 0) t.precision = precision_name(pn.result(0).stats.precision);
  t.density = density;
  t.rel_error = err;
  t.mass_recall = recall;
  t.row_kl = kl_ok ? kl : kNaN;
  if (pn.e2e) {
    const models::EndToEnd& e = *pn.e2e;
    if (e.has_tokens) {
      t.next_token_kl = e.mean_kl;
      t.top1_agreement = e.top1_agreement;
      t.perplexity = e.ppl_variant;
    }
    if (e.has_class) t.top1_agreement = e.class_agree ? 1.0 : 0.0;
    t.cls_cosine = e.cls_cosine;
  }
  return t;
}

std::vector<TradeoffPoint> tradeoff(const Analysis& a) {
  std::vector<TradeoffPoint> out;
  for (size_t v = 0; v < a.panels.size(); ++v) out.push_back(tradeoff_point(a, int(v)));
  return out;
}

ImageAttention image_attention(const Analysis& a, int panel, int layer, int head) {
  check_layer_head(a, layer, head, true);
  require(a.vision(), ErrorCode::InvalidArgument,
          "the image view needs a vision model and an image input (this input is not an image)");
  const Panel& pn = panel_at(a, panel);
  const Problem& p = a.problem(layer);
  ImageAttention out;
  out.spec = pn.spec;
  out.layer = layer;
  out.head = head;
  out.image = a.image;
  out.grid_h = a.grid_h;
  out.grid_w = a.grid_w;
  const int prefix = p.n_k - a.grid_h * a.grid_w;
  require(prefix >= 1, ErrorCode::Format, "image tokens do not match the patch grid");
  out.cls.assign(size_t(a.grid_h) * size_t(a.grid_w), 0.0f);
  std::vector<double> row;
  const int h0 = head < 0 ? 0 : head, h1 = head < 0 ? p.n_heads : head + 1;
  for (int h = h0; h < h1; ++h) {
    probability_row(*pn.variant, p, pn.result(layer), h, 0, 0, p.n_k, row);
    for (size_t i = 0; i < out.cls.size(); ++i)
      out.cls[i] += float(row[size_t(prefix) + i] / double(h1 - h0));
  }
  out.predicted = a.predicted_name();
  return out;
}

TokensData tokens(const Analysis& a, int panel, int layer, int head, int query) {
  check_layer_head(a, layer, head, false);
  const Panel& pn = panel_at(a, panel);
  const Problem& p = a.problem(layer);
  if (query < 0) query = p.n_q - 1;
  require(
      query < p.n_q, ErrorCode::InvalidArgument,
      "query " + std::to_string(query) + " is out of range (" + std::to_string(p.n_q) + " tokens)");
  std::vector<double> row;
  probability_row(*pn.variant, p, pn.result(layer), head, query, 0, p.n_k, row);
  TokensData t;
  t.spec = pn.spec;
  t.caption = variant_caption(pn.spec);
  t.layer = layer;
  t.head = head;
  t.query = query;
  t.labels = a.labels;
  t.weight.assign(row.begin(), row.end());
  return t;
}

}  // namespace attn::core
