// The workbench: the document behind the GUI and the CLI. It opens a Session (loads the model,
// cached; tokenises or preprocesses the input; runs the dense forward pass with Q/K/V capture)
// and answers the views' questions with plain structs (views.h): heatmaps of dense softmax and
// each variant, sinks, the head grid, trade-off points, image CLS attention, token weights.
// Results are cached per (variant, layer); not thread-safe: use one workbench per thread.
//
//   Workbench wb;
//   wb.open(load_session("s.attnscope.json"), "s.attnscope.json");
//   for (const HeatmapData& h : wb.heatmaps()) ...
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/session/session.h"
#include "app/workbench/views.h"
#include "compute/backend.h"
#include "compute/metrics.h"
#include "models/arch/model.h"

namespace attn {

struct WorkbenchOptions {
  int threads = 0;                            // 0 = all hardware threads
  const std::atomic<bool>* cancel = nullptr;  // cooperative cancellation (Error(Cancelled))
  bool verify_hashes = true;                  // check recorded model/image hashes on open
};

// Loaded models, shared between workbenches and kept while anyone uses them.
std::shared_ptr<const Model> cached_model(const std::string& id_or_dir);

// Display label of each token: its text (spaces shown as '·' when leading), else its piece.
std::vector<std::string> token_display_labels(const std::string& text,
                                              const std::vector<Token>& tokens,
                                              const std::vector<std::string>& fallback);

class Workbench {
 public:
  explicit Workbench(WorkbenchOptions o = {});
  ~Workbench();

  // ---- document ------------------------------------------------------------------------
  // Opens `s`: resolves and loads the model, prepares the input, runs the dense forward with
  // capture. `session_path` locates relative paths. Throws attn::Error naming what is wrong
  // (missing model or image, text for a vision model, bad variant spec, layer/head out of range).
  void open(const Session& s, const std::string& session_path = "");
  bool is_open() const { return model_ != nullptr; }
  const Session& session() const { return session_; }
  // Changes the selection without reloading (checked against the model).
  void select(int layer, int head);
  // Replaces the variant list (specs checked; caches of removed variants are dropped).
  void set_variants(const std::vector<std::string>& specs);

  // ---- model and input -----------------------------------------------------------------
  const ModelInfo& info() const;
  int n_tokens() const { return n_tokens_; }
  const std::vector<std::string>& labels() const { return labels_; }  // [N] display labels
  const Problem& problem(int layer) const;  // captured Q/K/V of a layer (all heads)
  double dense_forward_seconds() const { return dense_out_.seconds; }
  std::string describe_input() const;  // "text, 42 tokens" / "image coat_1.png, 28x28"

  // ---- results (cached) ----------------------------------------------------------------
  // The variant on every layer in order (sequence state shared), and dense softmax likewise.
  const std::vector<Result>& results(const std::string& spec);
  // Metrics of the variant against dense on one layer, all heads together and per head.
  const Metrics& layer_metrics(const std::string& spec, int layer);
  const Metrics& head_metrics(const std::string& spec, int layer, int head);

  // ---- views ---------------------------------------------------------------------------
  // One head's probabilities pooled to at most max_cells per side.
  HeatmapData heatmap(const std::string& spec, int layer, int head, int max_cells = 256);
  // Dense then each session variant, at the session's layer and head.
  std::vector<HeatmapData> heatmaps(int max_cells = 256);
  // Received mass per layer and token.
  SinkData sinks(const std::string& spec = "dense", double threshold = 0.3);
  // Per-(layer, head) metrics of a variant.
  HeadGrid head_grid(const std::string& spec = "dense");
  // One trade-off point; end_to_end adds a substituted forward pass (next-token KL etc.).
  TradeoffPoint evaluate(const std::string& spec, bool end_to_end = true);
  // Dense then each session variant.
  std::vector<TradeoffPoint> tradeoff(bool end_to_end = true);
  // CLS attention over patches (vision models); head -1 = mean over heads.
  ImageAttention image_attention(const std::string& spec, int layer, int head);
  // Attention of `query` (-1 = last token) over the tokens.
  TokensData tokens(const std::string& spec, int layer, int head, int query = -1);

 private:
  struct Cached;
  const Cached& cached(const std::string& spec);
  void check_layer_head(int layer, int head) const;

  WorkbenchOptions opt_;
  Session session_;
  std::string session_path_;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Backend> backend_;
  ModelInput input_;
  ModelOutput dense_out_;
  std::unique_ptr<Capture> capture_;
  int n_tokens_ = 0;
  std::vector<std::string> labels_;
  Image8 image8_;  // the decoded input image (vision)
  std::map<std::string, std::unique_ptr<Cached>> cache_;
};

// Display caption of a spec: "Sliding window [size=16]"; "Dense softmax" for dense.
std::string variant_caption(const std::string& spec);

// The two parts of a caption: display names ("Sinks + window (StreamingLLM)") and parameters
// ("sinks=4, window=256"; pieces of a composite spec separated by "; ").
struct VariantLabel {
  std::string name;
  std::string params;
};
VariantLabel variant_label(const std::string& spec);

}  // namespace attn
