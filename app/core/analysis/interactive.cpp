#include "app/core/analysis/interactive.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "app/core/heads/head_metrics.h"
#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"
#include "compute/score_mod.h"
#include "render/number_format.h"
#ifdef ATTN_HAVE_VULKAN
#include "compute/vulkan/context.h"
#include "compute/vulkan/tile_query.h"
#endif

namespace attn::core {
namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

render::PanelDesc panel_desc(const Analysis& a, int v) {
  const Panel& pn = a.panels[size_t(v)];
  const int l = a.layer(), h = a.head(), shown_head = h + a.head_offset;
  const Problem& p = a.problem(l);
  const Result& r = pn.result(l);
  render::PanelDesc pd;
  pd.reference = v == 0;
  pd.title = pd.reference ? "dense (reference)" : pn.spec;
  pd.ms = 1e3 * (r.stats.kernel_seconds + r.stats.select_seconds);
  pd.density = r.stats.density;
  const std::optional<models::EndToEnd>& e = pn.e2e;
  // Every number is the shown head's own (heatmap_header(), the figure's panel title and `analyze
  // --json` print the same), or says what it covers: the kernel's computed work and its time are
  // the layer's (the kernels report no per-head figures); the model's next-token KL is in the
  // comparison table beside the panels.
  // Kept entries (what the variant attends to) and computed work (what the kernel ran, blocks
  // and all) differ: a window of 16 or 64 on a short input may compute the same blocks.
  const double dense_flops = a.panels[0].result(l).stats.counted.flops;
  // The layer's figures go in one segment (one line when the header wraps, so that the map
  // keeps its room): "layer: computed 0.537, 0.44 ms".
  const std::string layer_part =
      " \u00b7 layer: " +
      (!pd.reference && dense_flops > 0
           ? "computed " + render::format_number(r.stats.counted.flops / dense_flops, 3) + ", "
           : std::string()) +
      fmt("%.2f ms", pd.ms);
  const std::string where = "layer " + std::to_string(l) + " head " + std::to_string(shown_head);
  pd.stats_tip = "Layer " + std::to_string(l) + ", head " + std::to_string(shown_head) +
                 ": density, error, recall, row KL and sinks are this head's own.\n"
                 "density: kept / visible entries; error: ||O - O_dense|| / ||O_dense||; "
                 "recall: dense mass inside the kept set, mean over queries; row KL: "
                 "KL(p_variant || p_dense), mean over queries.\n" +
                 std::string(kSinkRule) +
                 ".\nlayer: the kernel's flops over dense flops (computed, blocks and all) and its "
                 "time, for all heads of the layer. The model's next-token KL is in the table.";
  if (!a.has_metrics()) {
    // Until the per-head metrics are in, the layer's figures, each in a part of its own.
    pd.stats = where + " \u00b7 metrics... \u00b7 layer: density " +
               render::format_number(r.stats.density, 3) +
               (!pd.reference && dense_flops > 0
                    ? " \u00b7 layer: computed " +
                          render::format_number(r.stats.counted.flops / dense_flops, 3)
                    : std::string()) +
               " \u00b7 layer: " + fmt("%.2f ms", pd.ms);
  } else {
    const Metrics& lm = pn.layer[size_t(l)];
    pd.measured = true;
    pd.rel_error = lm.rel_error;
    pd.recall = lm.mass_recall;
    pd.kl = e && e->has_tokens ? e->mean_kl : std::nan("");
    std::string head;
    for (const std::string& seg : heatmap_header(a, v, l, h))
      head += (head.empty() ? "" : " \u00b7 ") + seg;
    pd.stats = (pd.reference ? where + " \u00b7 " : std::string()) + head + layer_part;
    if (!pd.reference && e && e->has_class)
      pd.stats += e->class_agree ? " \u00b7 model: class kept" : " \u00b7 model: class CHANGED";
  }
  if (!pn.notes.empty()) pd.stats += " \u00b7 " + pn.notes.front();
  if (r.layout.kind == Layout::Kind::Blocks) {
    const BlockLayout& b = r.layout.block(h);
    for (int qb = 0; qb < b.n_qb; ++qb)
      for (int32_t e2 = b.row_ptr[size_t(qb)]; e2 < b.row_ptr[size_t(qb) + 1]; ++e2) {
        const int kb = b.col[size_t(e2)];
        pd.kept_blocks.push_back({qb * b.bq, std::min((qb + 1) * b.bq, p.n_q), kb * b.bk,
                                  std::min((kb + 1) * b.bk, p.n_k)});
      }
  }
  return pd;
}

void fill_image(const Analysis& a, render::ImageDoc& d) {
  d.present = true;
  // The input as the model sees it (its preprocessing size), for the overlay.
  const models::Image8 shown =
      resize_image(a.image, a.input.image.height, a.input.image.width, models::Resample::Bilinear);
  d.height = shown.height;
  d.width = shown.width;
  d.channels = shown.channels;
  d.pixels = shown.data;
  d.grid_h = a.grid_h;
  d.grid_w = a.grid_w;
  d.heads = a.n_heads();
  d.predicted = a.predicted_name();
  const int l = a.layer(), H = a.n_heads(), N = a.n_tokens();
  const int grid = a.grid_h * a.grid_w, prefix = N - grid;
  const Problem& p = a.problem(l);
  std::vector<double> row;
  for (size_t v = 0; v < a.panels.size(); ++v) {
    const Panel& pn = a.panels[v];
    // Each panel with the class its model predicts, and whether it agrees with dense.
    std::string title = v == 0 ? "dense (reference) \u00b7 " + d.predicted : pn.spec;
    if (v > 0 && pn.e2e && pn.e2e->has_class) {
      const int c = pn.e2e->class_variant;
      title += " \u00b7 " +
               (size_t(c) < a.info->class_names.size() ? a.info->class_names[size_t(c)]
                                                       : "class " + std::to_string(c)) +
               (pn.e2e->class_agree ? " (agrees)" : " (CHANGED)");
    } else if (v > 0) {
      title += " \u00b7 predicting...";
    }
    d.panel_titles.push_back(title);
    std::vector<float> att(size_t(H * grid)), kept(size_t(H * grid));
    for (int hh = 0; hh < H; ++hh) {
      probability_row(*pn.variant, p, pn.result(l), hh, 0, 0, N, row);
      for (int i = 0; i < grid; ++i) {
        att[size_t(hh * grid + i)] = float(row[size_t(prefix + i)]);
        kept[size_t(hh * grid + i)] =
            layout_keeps(pn.result(l).layout, p, hh, 0, prefix + i) ? 1.f : 0.f;
      }
    }
    d.cls_attn.push_back(std::move(att));
    d.kept.push_back(v == 0 ? std::vector<float>{} : std::move(kept));
  }
  const std::vector<double> roll =
      attention_rollout(*a.panels[0].variant, *a.problems, *a.panels[0].results);
  if (!roll.empty()) d.rollout.assign(roll.begin() + prefix, roll.end());
}

// Head grid: the dense reference's own metrics, then each variant's comparisons with dense (the
// session's grid variant first chosen; a client may show any of them).
void fill_grid(const Analysis& a, render::HeadGridDoc& g) {
  g.layers = a.n_layers();
  g.heads = a.n_heads();
  const auto& table = head_metrics();
  const bool variants = a.panels.size() > 1;
  std::vector<size_t> shown;
  for (bool vs : {false, true})
    for (size_t m = 0; m < table.size(); ++m)
      if (table[m].vs_dense == vs && (!vs || variants)) shown.push_back(m);
  for (size_t m : shown) {
    g.metrics.push_back(table[m].vs_dense ? table[m].label : table[m].label + " (dense)");
    g.names.push_back(table[m].name);
    g.definitions.push_back(table[m].definition);
    g.vs_dense.push_back(table[m].vs_dense);
    g.unit.push_back(table[m].unit);
  }
  for (size_t v = 1; v < a.panels.size(); ++v) {
    g.variants.push_back(a.panels[v].spec);
    std::vector<std::vector<float>> vals;
    for (size_t m : shown) vals.push_back(a.panels[table[m].vs_dense ? v : 0].head_values[m]);
    g.variant_values.push_back(std::move(vals));
  }
  if (!a.session.view.grid_variant.empty())
    g.variant = std::max(0, a.panel_of(a.session.view.grid_variant) - 1);
  if (variants)
    g.values = g.variant_values[size_t(g.variant)];
  else
    for (size_t m : shown) g.values.push_back(a.panels[0].head_values[m]);
}

// Pooled probabilities of one panel: the Vulkan tile query when the session computes on Vulkan
// and a device serves this variant (the app's own, adopted), else the CPU tile query. `gpu`
// says which ran.
Tile panel_tile(const Analysis& a, const Panel& pn, const Problem& p, const Result& r,
                const TileRequest& req, bool* gpu) {
  *gpu = false;
#ifdef ATTN_HAVE_VULKAN
  if (a.session.backend == "vulkan") {
    if (auto ctx = vk::shared_context();
        ctx && !ctx->lost() && vk::tile_query_unsupported(*ctx, *pn.variant, p).empty()) {
      try {
        Tile t = vk::tile_probabilities_vulkan(ctx, *pn.variant, p, r, req);
        *gpu = true;
        return t;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Device) throw;  // a lost device: the CPU serves
      }
    }
  }
#endif
  (void)a, (void)pn;
  return tile_probabilities(*pn.variant, p, r, req);
}

}  // namespace

std::vector<int> shown_panels(const Analysis& a) {
  std::vector<int> out;
  for (size_t v = 0; v < a.panels.size(); ++v)
    if (v > 0 || a.session.view.show_dense || a.panels.size() == 1) out.push_back(int(v));
  return out;
}

render::Document document(const Analysis& a, const std::vector<TradeoffPoint>& sweep) {
  render::Document d;
  d.generation = a.generation;
  const int l = a.layer(), h = a.head(), N = a.n_tokens();
  d.title = a.model_summary + " \u00b7 " + std::to_string(N) + " tokens" +
            (a.notice.empty() ? "" : " (truncated)") +
            (a.preview() ? " \u00b7 head " + std::to_string(a.head_offset) +
                               " first, the other heads are running"
                         : "");
  if (!a.variants_ran()) return d;
  render::HeatmapDoc& hd = d.heat;
  const Problem& p = a.problem(l);
  hd.n_q = p.n_q;
  hd.n_k = p.n_k;
  hd.layer = l;
  hd.head = h + a.head_offset;
  hd.k_labels = a.labels;
  hd.q_labels.assign(a.labels.end() - p.n_q, a.labels.end());
  // The shown head's sinks (kSinkRule), as its panel header counts them.
  if (a.has_metrics() && !a.panels[0].heads.empty()) {
    const std::vector<float>& got = a.panels[0].heads[size_t(l)][size_t(h)].received;
    for (size_t j = 0; j < got.size(); ++j)
      if (got[j] > kSinkThreshold) hd.sinks.push_back(int(j));
  } else if (a.has_metrics()) {
    hd.sinks = a.panels[0].layer[size_t(l)].sinks;
  }
  for (int v : shown_panels(a)) hd.panels.push_back(panel_desc(a, v));
  if (a.vision()) fill_image(a, d.image);
  if (!a.has_metrics()) return d;  // head grid, sinks and trade-off need the comparisons

  fill_grid(a, d.grid);
  render::SinksDoc& s = d.sinks;
  const SinkData sd = sinks(a, 0);
  s.layers = sd.n_layers;
  s.n = sd.n;
  s.labels = sd.labels;
  s.received = sd.received;
  s.sinks = sd.sinks;
  for (const auto& r : a.resid)
    s.resid_norm.insert(s.resid_norm.end(), r.token_norm.begin(), r.token_norm.end());
  if (s.resid_norm.size() != size_t(s.layers) * size_t(s.n)) s.resid_norm.clear();
  s.massive_tokens = a.massive_tokens;

  auto mark = [](const TradeoffPoint& t, bool shown) {
    render::TradeoffMark m;
    m.label = t.spec;
    m.density = t.density;
    m.seconds = t.select_seconds + t.kernel_seconds;
    m.select_seconds = t.select_seconds;
    m.rel_error = t.rel_error;
    m.recall = t.mass_recall;
    m.kl = std::isfinite(t.next_token_kl) ? t.next_token_kl : t.row_kl;
    m.shown = shown;
    return m;
  };
  for (const TradeoffPoint& t : tradeoff(a)) d.tradeoff.points.push_back(mark(t, true));
  for (const TradeoffPoint& t : sweep) d.tradeoff.points.push_back(mark(t, false));
  return d;
}

std::vector<render::PanelTile> tiles(const Analysis& a, int q0, int q1, int k0, int k1, int w,
                                     int h, const std::atomic<bool>* cancel) {
  require(a.variants_ran(), ErrorCode::InvalidArgument, "tiles: the variants have not run yet");
  const int l = a.layer(), head = a.head();
  const Problem& p = a.problem(l);
  q0 = std::clamp(q0, 0, p.n_q - 1);
  q1 = std::clamp(q1, q0 + 1, p.n_q);
  k0 = std::clamp(k0, 0, p.n_k - 1);
  k1 = std::clamp(k1, k0 + 1, p.n_k);
  const TileRequest req{head, q0, q1, k0, k1, std::max(1, w), std::max(1, h), Pool::Max};
  const Panel& dense = a.panels[0];
  bool dense_gpu = false;
  const Tile dt = panel_tile(a, dense, p, dense.result(l), req, &dense_gpu);
  const int W = dt.w, Hc = dt.h;
  const int Q = q1 - q0, K = k1 - k0;
  // Cell of each key column and row (the tile's floor boundaries).
  std::vector<int> col_cell(static_cast<size_t>(K)), row_count(size_t(Hc), 0),
      col_count(size_t(W), 0);
  std::vector<int> col_start(size_t(W) + 1);  // first key of each cell column, and k1
  for (int x = 0; x <= W; ++x) col_start[size_t(x)] = k0 + int(int64_t(x) * K / W);
  for (int x = 0; x < W; ++x)
    for (int j = int(int64_t(x) * K / W); j < int(int64_t(x + 1) * K / W); ++j)
      col_cell[size_t(j)] = x, ++col_count[size_t(x)];
  for (int y = 0; y < Hc; ++y)
    row_count[size_t(y)] = int(int64_t(y + 1) * Q / Hc) - int(int64_t(y) * Q / Hc);
  const std::vector<int> shown = shown_panels(a);
  // The dropped-mass strip samples each cell row's middle row (query i): the dense mass on the
  // keys the variant kept there, computed on those keys alone (O(kept d), not O(N d)).
  const Result& dres = dense.result(l);
  const float scale = p.effective_scale();
  auto dense_mass = [&](int i, const std::vector<int32_t>& keys) {
    const Eigen::Map<const Eigen::VectorXf> qi(p.q_row(head, i), p.d);
    const double stat = dres.row_stat[size_t(head) * size_t(p.n_q) + size_t(i)];
    double mass = 0;
    for (int32_t j : keys) {
      const float sc = qi.dot(Eigen::Map<const Eigen::VectorXf>(p.k_row(head, j), p.d)) * scale;
      mass += normalised_prob(dense.variant->normaliser(), sc, stat, p.n_k);
    }
    return mass;
  };

  std::vector<render::PanelTile> out;
  for (int v : shown) {
    if (cancel && cancel->load()) throw Error(ErrorCode::Cancelled, "tiles cancelled");
    const Panel& pn = a.panels[size_t(v)];
    const Result& r = pn.result(l);
    bool gpu = dense_gpu;
    const Tile vt = v == 0 ? dt : panel_tile(a, pn, p, r, req, &gpu);
    render::PanelTile t;
    t.gpu = gpu;
    t.q0 = q0;
    t.q1 = q1;
    t.k0 = k0;
    t.k1 = k1;
    t.w = W;
    t.h = Hc;
    t.texels.assign(size_t(W) * Hc * 4, 0.f);
    // Kept fraction per cell from the executed layout, and the visible fraction (causal rule).
    std::vector<float> kept(size_t(W) * Hc, 0.f), visible(size_t(W) * Hc, 0.f);
    std::vector<std::vector<int32_t>> keys_of(static_cast<size_t>(Hc));
    // Dense layouts keep what is visible: counted per cell in closed form (positions are the
    // default ones), instead of listing N keys per row.
    const bool closed_form =
        r.layout.kind == Layout::Kind::Dense && p.q_pos.empty() && p.k_pos.empty();
    parallel_for(Hc, [&](int y) {
      std::vector<int32_t> keys;
      const int ia = q0 + int(int64_t(y) * Q / Hc), ib = q0 + int(int64_t(y + 1) * Q / Hc);
      const int mid = q0 + int((int64_t(y) * Q / Hc + int64_t(y + 1) * Q / Hc) / 2);
      for (int i = ia; i < ib; ++i) {
        {
          const int end = p.causal ? std::min(k1, p.qpos(i) + 1) : k1;
          for (int x = 0; x < W && col_start[size_t(x)] < end; ++x)
            visible[size_t(y) * W + x] +=
                float(std::min(end, col_start[size_t(x) + 1]) - col_start[size_t(x)]);
        }
        if (closed_form) {
          const int end = p.causal ? std::min(k1, p.qpos(i) + 1) : k1;
          for (int x = 0; x < W && col_start[size_t(x)] < end; ++x)
            kept[size_t(y) * W + x] +=
                float(std::min(end, col_start[size_t(x) + 1]) - col_start[size_t(x)]);
        } else {
          layout_row_keys(r.layout, p, head, i, keys);
          for (int32_t j : keys)
            if (j >= k0 && j < k1) kept[size_t(y) * W + col_cell[size_t(j - k0)]] += 1.f;
        }
        if (i == std::min(mid, q1 - 1) && v != 0)
          layout_row_keys(r.layout, p, head, i, keys_of[size_t(y)]);
      }
      for (int x = 0; x < W; ++x) {
        const float cell = float(std::max(1, row_count[size_t(y)] * col_count[size_t(x)]));
        kept[size_t(y) * W + x] /= cell;
        visible[size_t(y) * W + x] /= cell;
      }
    });
    for (int y = 0; y < Hc; ++y)
      for (int x = 0; x < W; ++x) {
        const size_t c = size_t(y) * W + x;
        const float vp = vt.cells[c], dp = dt.cells[c];
        t.texels[c * 4 + 0] = vp;
        t.texels[c * 4 + 1] = dp;
        t.texels[c * 4 + 2] = kept[c];
        t.texels[c * 4 + 3] = visible[c];
        t.vmax = std::max(t.vmax, vp);
        t.dmax = std::max(t.dmax, std::fabs(vp - dp));
      }
    if (v != 0) {
      t.dropped_rows.assign(size_t(Hc), 0.f);
      parallel_for(Hc, [&](int y) {
        const int mid = q0 + int((int64_t(y) * Q / Hc + int64_t(y + 1) * Q / Hc) / 2);
        const double kept_mass = dense_mass(std::min(mid, q1 - 1), keys_of[size_t(y)]);
        t.dropped_rows[size_t(y)] = float(std::clamp(1.0 - kept_mass, 0.0, 1.0));
      });
    }
    out.push_back(std::move(t));
  }
  return out;
}

render::HoverInfo hover(const Analysis& a, int shown_panel, int q, int k) {
  render::HoverInfo hi;
  const std::vector<int> shown = shown_panels(a);
  if (!a.variants_ran() || shown_panel < 0 || shown_panel >= int(shown.size())) return hi;
  const int l = a.layer(), head = a.head();
  const Problem& p = a.problem(l);
  if (q < 0 || q >= p.n_q || k < 0 || k >= p.n_k) return hi;
  const Panel& pn = a.panels[size_t(shown[size_t(shown_panel)])];
  const Panel& dense = a.panels[0];
  std::vector<double> row, drow;
  attn::probability_row(*pn.variant, p, pn.result(l), head, q, 0, p.n_k, row);
  attn::probability_row(*dense.variant, p, dense.result(l), head, q, 0, p.n_k, drow);
  hi.valid = true;
  hi.prob = row[size_t(k)];
  hi.dense_prob = drow[size_t(k)];
  // Rank among the keys the variant gives weight to (0 when it gives this key none).
  hi.rank =
      hi.prob > 0
          ? 1 + int(std::count_if(row.begin(), row.end(), [&](double x) { return x > hi.prob; }))
          : 0;
  hi.kept = layout_keeps(pn.result(l).layout, p, head, q, k);
  hi.visible = p.visible(q, k);
  return hi;
}

std::vector<float> probability_row(const Analysis& a, int shown_panel, int q) {
  const std::vector<int> shown = shown_panels(a);
  if (!a.variants_ran() || shown_panel < 0 || shown_panel >= int(shown.size())) return {};
  const int l = a.layer();
  const Problem& p = a.problem(l);
  if (q < 0 || q >= p.n_q) return {};
  const Panel& pn = a.panels[size_t(shown[size_t(shown_panel)])];
  std::vector<double> row;
  attn::probability_row(*pn.variant, p, pn.result(l), a.head(), q, 0, p.n_k, row);
  return std::vector<float>(row.begin(), row.end());
}

std::vector<float> received_mass(const Analysis& a) {
  if (!a.has_metrics()) return {};
  return a.panels[0].layer[size_t(a.layer())].sink_score;
}

}  // namespace attn::core
