// The GUI's data layer (no Qt): one request (model, input, variants) becomes an Analysis holding
// every layer's problem, the dense reference and each variant's results and metrics, from which
// the renderer's document, tiles and hover values are derived. Built on the same core calls as
// `attnscope analyze` (compute/layer_analysis.h, substitution.h).
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "compute/metrics.h"
#include "compute/variant.h"
#include "models/arch/model.h"
#include "models/arch/substitution.h"
#include "render/document.h"

namespace attn::gui {

struct AnalysisRequest {
  std::string model = "default-text";  // folder, "default-text", "default-vision", or "synthetic"
  std::string text;                    // text models
  std::string image;                   // vision models: image file
  std::string tensors;                 // raw q.npy/k.npy/v.npy folder instead of a model
  int synthetic_tokens = 4096;         // model "synthetic": random Q/K/V of this many tokens
  std::vector<std::string> variants;   // variant specs shown beside the dense reference
  bool show_dense = true;              // the dense reference gets a panel of its own
  std::string backend = "cpu";
  std::vector<std::string> variant_backends;  // per variant; empty entry = `backend`
  int layer = 0, head = 0;                    // selection (cheap to change)
  bool sweep = true;                          // trade-off sweeps after the main results

  // Everything but the selection: a change here means the model must run again.
  std::string heavy_key() const;
};

struct Analysis {
  uint64_t generation = 0;
  AnalysisRequest request;
  std::string model_summary;                 // "gpt2 · 4 layers · 4 heads · d=32 · context 256"
  std::optional<ModelInfo> info;             // absent for synthetic problems and raw tensors
  std::vector<Token> tokens;                 // text input with byte spans
  std::vector<std::string> labels;           // [N] display labels
  std::string notice;                        // truncation notice
  std::vector<Problem> problems;             // [layers] all heads
  std::vector<Result> dense;                 // [layers] dense softmax
  std::vector<std::string> specs;            // [panels]; "dense" first when shown
  std::vector<Variant> variants;             // [panels]
  std::vector<std::vector<Result>> results;  // [panels][layers]
  std::vector<std::vector<Metrics>> layer_metrics;              // [panels][layers] all heads
  std::vector<std::vector<std::vector<Metrics>>> head_metrics;  // [panels][layers][heads]
  std::vector<Metrics> dense_metrics;          // [layers] dense vs dense (entropy, received, sinks)
  std::vector<std::vector<float>> resid_norm;  // [layers] f32 [N]
  std::vector<int> massive_tokens;
  std::vector<std::optional<EndToEnd>> e2e;  // [panels]
  render::ImageDoc image;  // vision input (per-panel CLS maps filled per selection)
  std::vector<render::TradeoffPoint> sweep;  // extra trade-off points
  double forward_seconds = 0, variants_seconds = 0, metrics_seconds = 0;
  bool has_metrics() const { return !layer_metrics.empty(); }
  int n_layers() const { return int(problems.size()); }
  int n_heads() const { return problems.empty() ? 0 : problems[0].n_heads; }
  int n_tokens() const { return problems.empty() ? 0 : problems[0].n_k; }
};

// Keeps the current model alive between requests (loading is the slow part of a model change);
// loading goes through the workbench's process-wide cache, shared with sessions and figures.
class ModelCache {
 public:
  const Model* get(const std::string& name);

 private:
  std::string name_;
  std::shared_ptr<const Model> model_;
};

// Runs the model (or builds the problem) and every variant. Checks `cancel` between steps and
// throws Error(Cancelled). `reuse` (same heavy_key) skips the work already done.
std::shared_ptr<Analysis> run_analysis(const AnalysisRequest& r, ModelCache& models,
                                       const std::atomic<bool>* cancel,
                                       std::shared_ptr<const Analysis> reuse);

// Comparisons with the dense reference (per layer, and per head up to 1024 tokens): the slow
// part for long inputs, run after the first results are shown.
void add_metrics(Analysis& a, const std::atomic<bool>* cancel);

// Trade-off sweep: each shown variant's first parameter over its range on the selected layer,
// as a list of specs the worker runs one at a time between more urgent jobs.
std::vector<std::string> sweep_specs(const Analysis& a);
// One sweep point (nullopt when the setting is not valid for this problem).
std::optional<render::TradeoffPoint> sweep_point(const Analysis& a, const std::string& spec,
                                                 const std::atomic<bool>* cancel);

// The renderer's document for the selected layer and head.
render::Document build_document(const Analysis& a);

// Pooled cells of every panel for one region (selected layer and head).
std::vector<render::PanelTile> build_tiles(const Analysis& a, int q0, int q1, int k0, int k1, int w,
                                           int h, const std::atomic<bool>* cancel);

// Exact values of one entry for the hover inspector, and one row for the token view.
render::HoverInfo hover_info(const Analysis& a, int panel, int q, int k);
std::vector<float> probability_row_of(const Analysis& a, int panel, int q);

// Mean attention each token receives in the selected layer (dense, all heads) for the editor.
std::vector<float> received_mass(const Analysis& a);

// Display form of a token piece: byte-level markers become visible characters.
std::string display_label(const std::string& piece);

}  // namespace attn::gui
