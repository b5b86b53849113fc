// What the host hands the renderer to show: plain numbers and strings, no compute objects.
// The app core fills these from the compute core's results (app/core/analysis/interactive.h,
// for the GUI and the CLI alike); the renderer only draws them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attn::render {

// Pooled cells of one panel over a token region (the host computes them for the visible region
// only, at about one cell per pixel, never N x N).
struct PanelTile {
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0;  // token region [q0, q1) x [k0, k1)
  int w = 0, h = 0;                    // cells
  // f32 [h, w, 4]: variant prob, dense prob, kept fraction, visible fraction (entries the causal
  // rule shows; a cell with visible entries and none kept is dropped: render::kDroppedRgb)
  std::vector<float> texels;
  std::vector<float> dropped_rows;  // f32 [h]: dense mass the variant dropped, per cell row
  float vmax = 0;                   // largest variant probability in the tile
  float dmax = 0;                   // largest |variant - dense| in the tile
  bool gpu = false;                 // probabilities came from the Vulkan tile query
};

struct BlockRect {
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0;  // kept block [q0, q1) x [k0, k1) in token indices
};

struct PanelDesc {
  std::string title;      // variant spec
  std::string stats;      // one line: the head's density, error, recall, sinks; layer time
  std::string stats_tip;  // what each number of `stats` covers, shown on hover
  bool reference = false;
  std::vector<BlockRect> kept_blocks;  // block-sparse layouts of the shown head (for outlines)
  // Layer-wide figures for the comparison table (NaN when not measured yet).
  double density = 1, rel_error = 0, recall = 1, kl = 0, ms = 0;
  bool measured = false;
};

struct HeatmapDoc {
  int n_q = 0, n_k = 0;
  int layer = 0, head = 0;
  std::vector<std::string> q_labels, k_labels;  // [n_q], [n_k]
  std::vector<int> sinks;                       // the shown head's sinks (dense panel)
  std::vector<PanelDesc> panels;                // [0] is the dense reference when shown
};

// Layers x heads, coloured by a chosen metric.
struct HeadGridDoc {
  int layers = 0, heads = 0;
  std::vector<std::string> metrics;        // metric titles
  std::vector<std::string> names;          // metric ids (core head_metrics names)
  std::vector<std::string> definitions;    // [metric] one line: what the number is (on hover)
  std::vector<std::vector<float>> values;  // [metric] f32 [layers, heads], the chosen variant's
  std::vector<bool> vs_dense;              // [metric] compares a variant with dense
  std::vector<bool> unit;                  // [metric] values lie in [0, 1] (a fixed scale fits)
  std::vector<std::string> variants;       // variants whose comparisons can be shown
  std::vector<std::vector<std::vector<float>>> variant_values;  // [variant][metric] as values
  int variant = 0;  // the session's chosen variant (index in variants)
};

// Received attention mass per token position per layer, and residual-stream norms.
struct SinksDoc {
  int layers = 0, n = 0;
  std::vector<float> received;    // f32 [layers, n]: mean over heads and queries
  std::vector<float> resid_norm;  // f32 [layers, n]: L2 norm of the residual after each layer
  std::vector<std::string> labels;
  std::vector<int> sinks;           // token positions flagged as sinks in any layer
  std::vector<int> massive_tokens;  // tokens holding a massive activation
};

// A vision model's input image and per-patch attention of the CLS token.
struct ImageDoc {
  bool present = false;
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // u8 [height, width, channels] as shown (the model's input size)
  int grid_h = 0, grid_w = 0;   // patch grid
  int heads = 0;
  std::string predicted;  // dense prediction
  std::vector<std::string> panel_titles;
  std::vector<std::vector<float>> cls_attn;  // [panel] f32 [heads, grid_h * grid_w]
  std::vector<std::vector<float>> kept;      // [panel] f32 [heads, grid]: 1 kept, 0 dropped
  std::vector<float> rollout;                // f32 [grid]: attention rollout of the dense model
};

struct TradeoffMark {
  std::string label;
  double density = 1, seconds = 0, rel_error = 0, recall = 1, kl = 0;
  double select_seconds = 0;  // the part of `seconds` spent selecting (dynamic patterns)
  bool shown = false;         // one of the panels
};

struct TradeoffDoc {
  std::vector<TradeoffMark> points;
};

// What each attribution method says one target depended on (app/core/attribution), filled by
// the core (app/core/analysis/attribution_doc.h) from one run: scores per method over the
// input's units (text tokens or image patches), the methods' rank agreement, and deletion /
// insertion curves of the target's probability when they were measured.
struct AttributionCurve {
  std::string label;                       // a method's short title, or "random"
  bool random = false;                     // the mean of random orders (the chance line)
  std::vector<float> deletion, insertion;  // f32 [steps + 1]: the target's probability
  double aopc = 0;                         // deletion: mean of p_0 - p_k (higher: faithful)
  double insertion_area = 0;               // insertion: mean of p_k (higher: faithful)
};

struct AttributionDoc {
  bool present = false;      // false until a run finished
  std::string title;         // one line: the target, its probability, z, baseline, variant
  std::string note;          // "" or a warning (the input changed since the run, ...)
  std::string target_label;  // the target as text ("' the'", "Sneaker")
  // Methods, in the run's order.
  std::vector<std::string> methods;        // ids ("rollout")
  std::vector<std::string> titles;         // table titles ("Attention rollout")
  std::vector<std::string> short_titles;   // titles without their parenthesis ("Occlusion")
  std::vector<std::string> details;        // one line each: largest |score|, seconds, checks
  std::vector<std::vector<float>> scores;  // [method] f32 [units]: signed, larger = more
  std::vector<std::vector<int>> ranks;     // [method] [units]: 1-based rank among the ranked
                                           // units (ties by unit index), 0 = not ranked
  std::vector<float> scale;                // [method] largest |score| over the ranked units
  // Units: text tokens, or image patches in row-major grid order.
  std::vector<std::string> labels;  // [units] display text ("r,c" for patches)
  std::vector<uint8_t> ranked;      // [units] 1 where the target can depend on the unit
  std::vector<uint8_t> word_start;  // [units] text: 1 where a word starts (a space before it)
  std::vector<uint8_t> line_break;  // [units] text: 1 where the unit ends a line (a newline)
  int n_ranked = 0;                 // units with ranked[u] == 1
  int first_token = 0;              // token index of unit 0
  int target_unit = -1;             // text: the unit at the target position (z is read there)
  // Images: the input as the model sees it, and the patch grid.
  bool image = false;
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // u8 [height, width, channels]
  int grid_h = 0, grid_w = 0;
  // Rank agreement over the ranked units: f32 [methods, methods], 1 on the diagonal.
  std::vector<float> spearman, kendall, top_k;
  int k = 0;  // the k of top_k
  // Faithfulness (empty when not measured): fractions of the ranked units removed / revealed.
  std::vector<float> fractions;          // f32 [steps + 1]
  std::vector<AttributionCurve> curves;  // one per method, then the random orders
  int units() const { return int(labels.size()); }
};

// One head's queries and keys in one 2-D map (AttentionViz's joint embedding,
// app/core/attribution/qk_embedding.h) over the current input, filled by the core
// (app/core/analysis/qk_doc.h): a query lies near the keys it attends to. Picking a query shows
// its row of the head's attention pattern.
struct QkDocPoint {
  float x = 0, y = 0;  // map coordinates (equal units on both axes)
  bool key = false;    // a key (else a query)
  int position = 0;    // token position in the input
};

struct QkDoc {
  bool present = false;  // false until a map was computed
  uint64_t serial = 0;   // changes with every map (a picked query is kept only within one)
  std::string title;     // one line: layer/head, method, rank fidelity, tokens
  std::string note;      // "" or a warning (the input or head changed since the map, ...)
  int layer = 0, head = 0, kv_head = 0;
  std::string method;               // "pca" | "tsne"
  double rank_fidelity = 0;         // Spearman's rho of -distance vs q.k over visible pairs
  double scale = 1;                 // queries x scale, keys / scale
  std::vector<QkDocPoint> points;   // queries then keys
  std::vector<std::string> labels;  // [n] token display labels
  std::vector<float> pattern;       // f32 [n, n]: the head's attention pattern (row = query)
  int n() const { return int(labels.size()); }
};

// One head's arithmetic step by step on a short input (app/core/teaching/head_steps.h), filled
// by the core (app/core/teaching/steps_doc.h): each stage a small labelled matrix of the real
// numbers, each cell with the dot product or sum that made it (shown on hover).
struct StepsMatrix {
  std::string id;                       // x | q | k | v | scores | scaled | masked | weights | ...
  std::string title;                    // "Q = X W_q + b_q"
  std::string note;                     // weight shapes, the mask, the shared KV head
  std::string hook;                     // the hook its numbers are ("blocks.0.attn.q") or ""
  int rows = 0, cols = 0;               // rows are queries (tokens)
  bool key_columns = false;             // columns are keys (tokens), else dimensions
  std::vector<std::string> col_labels;  // [cols]
  std::vector<float> values;            // f32 [rows, cols]
  std::vector<uint8_t> dropped;         // [rows, cols] 0 kept, 1 causal rule, 2 the variant
  std::vector<std::string> how;         // [rows, cols] provenance
};

struct StepsDoc {
  bool present = false;             // false until steps were computed (or refused)
  std::string title;                // one line: model, layer/head, variant, tokens
  std::string message;              // why there are no steps (too long an input...), or ""
  int layer = 0, head = 0;          // the head the steps are of
  std::vector<std::string> tokens;  // [n] "0 The"
  std::vector<StepsMatrix> stages;  // in order: x, q, k, v, scores, scaled, masked, weights, ...
};

// Exact values behind a hovered cell, computed by the host (the renderer knows only pooled cells).
struct HoverInfo {
  bool valid = false;
  double prob = 0;        // the variant's probability of (query, key)
  double dense_prob = 0;  // the dense reference's
  int rank = 0;           // 1-based rank of the key in the query's row (by the variant)
  bool kept = true;       // whether the variant computed this entry
  bool visible = true;    // false where the causal rule hides the key from the query
};

struct Document {
  uint64_t generation = 0;  // tiles carry the generation they were computed for
  std::string title;        // model and input, one line
  HeatmapDoc heat;
  HeadGridDoc grid;
  SinksDoc sinks;
  ImageDoc image;
  TradeoffDoc tradeoff;
  AttributionDoc attribution;  // the last attribution run (kept by the host across analyses)
  QkDoc qk;                    // the last query-key map (kept by the host likewise)
  StepsDoc steps;              // one head's arithmetic (kept by the host likewise)
};

}  // namespace attn::render
