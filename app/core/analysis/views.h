// Plain data behind every view and figure preset: what the GUI panels draw and what the figure
// layouts paint. No drawing here and no Qt; every struct is filled from an Analysis
// (analysis.h) by the functions at the end of this file.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "models/arch/image.h"

namespace attn::core {

struct Analysis;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One head's attention probabilities, pooled (max) to at most max_cells x max_cells cells.
struct HeatmapData {
  std::string spec;     // canonical variant spec ("dense" for the reference)
  std::string caption;  // display name with parameters, for captions
  int layer = 0, head = 0;
  int n_q = 0, n_k = 0;               // size of the full matrix
  int rows = 0, cols = 0;             // cells drawn (rows <= n_q, cols <= n_k)
  std::vector<float> cells;           // f32 [rows, cols]: max probability within each cell
  std::vector<std::string> q_labels;  // [n_q] query token labels
  std::vector<std::string> k_labels;  // [n_k] key token labels
  bool causal = true;
  double density = 1;      // kept / visible entries of this head
  double rel_error = 0;    // ||O - O_dense|| / ||O_dense|| of this head
  double mass_recall = 1;  // dense mass inside the kept set, mean over rows
  double row_kl = 0;       // KL(p_variant || p_dense), mean over rows (NaN: not a
                           // distribution)
  std::vector<int> sinks;  // this head's sinks (kSinkRule): keys receiving > kSinkThreshold
  // u8 [rows, cols]: 1 where the cell has entries the causal rule shows but the variant kept none
  // of them (drawn in a colour outside the map, not as probability 0); empty when none is dropped
  std::vector<uint8_t> dropped;
};

// What a sink is, everywhere (panel headers, the Sinks view, head-grid metrics, figures): a key
// that receives more than kSinkThreshold of the attention, averaged over the queries of a head
// (panels) or over the queries and heads of a layer (the Sinks view, "layer mean"). A head has a
// sink exactly when its max-token mass exceeds the threshold. The `sink` role of `heads` scores
// the first-token mass instead (head_roles.h).
constexpr double kSinkThreshold = 0.3;
inline constexpr const char* kSinkRule =
    "a sink is a key that receives more than 0.3 of the attention, averaged over the queries "
    "(of this head; in the Sinks view, of every head of the layer)";

// A heatmap panel's header, in segments ("density 0.626", "error 0.013", "recall 0.998", "2
// sinks"): the head's own values only. The GUI's panel header, the figure's panel title and
// `analyze --json` ("header") print these strings.
std::vector<std::string> heatmap_header(const HeatmapData& h);

// Mass each token receives (mean over heads and queries), per layer: where the sinks are.
struct SinkData {
  std::string spec;                 // variant the masses come from ("dense" usually)
  int n_layers = 0, n = 0;          // layers, tokens
  std::vector<std::string> labels;  // [n]
  std::vector<float> received;      // f32 [n_layers, n]
  std::vector<int> sinks;           // tokens whose received mass exceeds the threshold somewhere
  double threshold = kSinkThreshold;
};

// One value per (layer, head) of a variant for each head metric (head_metrics.h), for the head
// overview.
struct HeadGrid {
  std::string spec;
  int n_layers = 0, n_heads = 0;
  std::vector<std::string> metrics;        // names, in head_metrics() order
  std::vector<std::vector<float>> values;  // [metric] f32 [L, H]
  // One metric's matrix by name; throws Error(InvalidArgument) listing the names.
  const std::vector<float>& metric(const std::string& name) const;
};

// Cost against accuracy of one variant over every layer of the input (one trade-off point).
struct TradeoffPoint {
  std::string spec;
  std::string caption;            // display name with parameters
  std::string pattern;            // family for grouping: "window", "performer", "dense"
  double density = 1;             // kept / visible entries, mean over layers
  double flops = 0;               // counted flops, summed over layers
  double select_seconds = 0;      // dynamic patterns' selection, summed over layers
  double kernel_seconds = 0;      // attention kernels, summed over layers (selection apart)
  double rel_error = 0;           // relative output error, mean over layers
  double mass_recall = 1;         // mean over layers
  double row_kl = kNaN;           // attention-row KL, mean over layers
  double next_token_kl = kNaN;    // end to end: mean KL(dense || variant) of next-token logits
  double top1_agreement = kNaN;   // end to end: argmax agreement
  double perplexity = kNaN;       // end to end: perplexity of the input under the variant
  double cls_cosine = kNaN;       // end to end (encoders): cosine of CLS embeddings
  std::string precision = "f32";  // storage of Q, K, V in the variant's kernels ("bf16", "f16")
  // Over a dataset (`sweep --dataset`): class accuracy and its bootstrap 95% interval, drawn as
  // error bars.
  double accuracy = kNaN, accuracy_lo = kNaN, accuracy_hi = kNaN;
  // Over a text dataset: next-token loss (nats, mean over records) and its interval.
  double loss = kNaN, loss_lo = kNaN, loss_hi = kNaN;
};

// CLS attention over image patches, for the overlay.
struct ImageAttention {
  std::string spec;
  int layer = 0, head = 0;     // head -1: mean over heads
  models::Image8 image;        // the input as decoded from the file
  int grid_h = 0, grid_w = 0;  // patches per column / row
  std::vector<float> cls;      // f32 [grid_h, grid_w]: attention of CLS to each patch
  std::string predicted;       // class predicted by the dense model ("" when none)
};

// Attention of one query over the tokens, for the text view.
struct TokensData {
  std::string spec;
  std::string caption;
  int layer = 0, head = 0, query = 0;
  std::vector<std::string> labels;  // [n] token text
  std::vector<float> weight;        // f32 [n]: probability query -> token (0 after the query)
};

}  // namespace attn::core

namespace attn::core {

// ---- views of an analysis (const; any thread) -------------------------------------------------
// One panel's probabilities at (layer, head), pooled (max) to at most max_cells per side. Needs
// run_variants(); metrics fields are NaN before add_metrics() or when per-head metrics were
// skipped.
HeatmapData heatmap(const Analysis& a, int panel, int layer, int head, int max_cells = 256);
// Every panel at the session's layer and head (dense first).
std::vector<HeatmapData> heatmaps(const Analysis& a, int max_cells = 256);
// heatmap_header() of that panel's heatmap, without pooling its cells.
std::vector<std::string> heatmap_header(const Analysis& a, int panel, int layer, int head);
// Received mass per layer and token of a panel (needs add_metrics()).
SinkData sinks(const Analysis& a, int panel = 0, double threshold = kSinkThreshold);
// Per-(layer, head) metrics of a panel (needs per-head metrics).
HeadGrid head_grid(const Analysis& a, int panel);
// Cost against accuracy of a panel: layer means, end-to-end figures when they ran.
TradeoffPoint tradeoff_point(const Analysis& a, int panel);
// The same numbers without the caption and family (which parse the spec): a dataset's records.
TradeoffPoint tradeoff_values(const Analysis& a, int panel);
std::vector<TradeoffPoint> tradeoff(const Analysis& a);
// CLS attention over the patches (vision); head -1 = mean over heads.
ImageAttention image_attention(const Analysis& a, int panel, int layer, int head);
// Attention of `query` (-1 = last token) over the tokens.
TokensData tokens(const Analysis& a, int panel, int layer, int head, int query = -1);

}  // namespace attn::core
