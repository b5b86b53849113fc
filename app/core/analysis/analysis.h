// The analysis core: the one orchestrator behind the GUI, the CLI and the figures (no Qt).
// A Session goes in; an Analysis comes out, built in stages so that a live client can show the
// first heatmaps before the slow comparisons are done:
//
//   open()          model (cached), input encoding, dense forward with Q/K/V capture, dense
//                   attention of every layer (the reference);
//   run_variants()  each session variant on every layer, on its backend (fallback to cpu);
//   add_metrics()   comparisons with dense per layer and per head, head-grid metrics;
//   add_end_to_end() each variant substituted into the model (next-token KL, top-1, class).
//
// An Analysis is plain data and never changes once a stage returned it, so views of it (views.h
// functions, interactive.h) are const and may run on any thread. A stage works on a copy.
//
//   core::Options o;
//   auto a = core::analyze(core::load_session("s.attnscope.json"), "s.attnscope.json", o);
//   core::HeadGrid g = core::head_grid(*a, 1);   // the first variant's per-head metrics
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/core/session/session.h"
#include "compute/backend.h"
#include "compute/metrics.h"
#include "compute/precision.h"
#include "compute/variant.h"
#include "models/arch/hooks.h"
#include "models/arch/image.h"
#include "models/arch/intervention.h"
#include "models/arch/model.h"
#include "models/arch/substitution.h"

namespace attn::core {

struct Options {
  int threads = 0;  // 0 = all hardware threads
  // Storage of Q, K and V in the variants' attention kernels (compute/precision.h), in every
  // layer they run in and in the substituted forward passes; the dense reference is always f32
  // (`analyze --precision bf16` compares dense in bf16 with it, a sweep each point).
  Precision precision = Precision::F32;
  const std::atomic<bool>* cancel = nullptr;  // checked between steps; throws Error(Cancelled)
  bool verify_hashes = true;                  // check the session's recorded file hashes
  // Per-head comparisons cost a few N^2 d passes per head: above this many tokens they are
  // skipped (0 = always computed). The GUI sets a bound to stay live on long inputs.
  int per_head_max_tokens = 0;
  bool head_grid = true;  // add_metrics(): per-head comparisons and head-grid values at all
  // open(): from this many tokens on, a preview of the selected head alone (0 = never): a live
  // client draws its heatmaps first, then full_heads() runs the rest.
  int preview_tokens = 0;
  bool end_to_end = true;  // analyze(): run add_end_to_end()
  // open(): capture the residual stream for its per-layer statistics and massive-activation
  // tokens (the report's residual rows and the views' markers); datasets summarise neither.
  bool residual_stats = true;
  std::string input_name = "the input text";  // names the text in messages ("--text-file a.txt")
  // open(): also capture these hooks (names or globs) and keep them; add_end_to_end(): capture
  // them in each substituted pass too (Panel::capture).
  std::string extra_hooks;
  std::function<void(const std::string& stage)> progress;  // optional, from the calling thread
  // open(): input kind "image" with this decoded image instead of reading Session::input.image
  // (records of an IDX dataset, which live in memory; the session's path then only names it).
  const models::Image8* image = nullptr;
  // open(): the edits Session::ablation stands for, computed elsewhere (a dataset's corpus mean);
  // null = built from the session.
  std::shared_ptr<const models::Intervention> ablation;
  // open(): the model Session::model names, loaded already (a dataset's records share one and
  // skip resolving its folder again); null = cached_model() of the session's model.
  std::shared_ptr<const models::Model> model;
  // open(): the panels' variants, made already: dense, then Session::variants in order (a
  // dataset's records share them); empty = made from the specs.
  std::vector<std::shared_ptr<const Variant>> variants;
};

// One variant as the analysis runs it: [0] is always the dense reference.
struct Panel {
  std::string spec;  // canonical spec ("dense" for the reference)
  std::shared_ptr<const Variant> variant;
  std::string backend;             // backend asked for
  std::vector<std::string> notes;  // why a fallback backend ran, once per reason
  // [L]; null until run_variants(). Shared: copies of an analysis (one per stage) share the
  // outputs, which are O(N d) per layer and head.
  std::shared_ptr<const std::vector<Result>> results;
  std::vector<Metrics> layer;               // [L] all heads vs dense; empty until add_metrics()
  std::vector<std::vector<Metrics>> heads;  // [L][H]; empty when skipped
  // [metric of head_metrics()] f32 [L, H] after add_metrics(); comparisons with dense are NaN
  // where per-head metrics were skipped.
  std::vector<std::vector<float>> head_values;
  std::optional<models::EndToEnd> e2e;  // after add_end_to_end() (models only)
  double forward_seconds = 0;           // the substituted forward pass
  // The substituted forward pass's hooks and outputs (logits), kept when Options::extra_hooks
  // asked for hooks; null otherwise and for panels that share the reference.
  std::shared_ptr<const models::Capture> capture;
  std::shared_ptr<const models::ModelOutput> substituted;
  Precision precision() const;  // storage of Q, K, V its kernels ran in (f32 until run)
  bool ran() const { return results != nullptr; }
  const Result& result(int layer) const { return (*results)[size_t(layer)]; }
};

struct Analysis {
  Session session;           // what was asked (selection included)
  std::string session_path;  // locates the session's relative paths ("" = none)
  uint64_t generation = 0;   // set by clients that publish successive analyses

  // Model and input.
  std::shared_ptr<const models::Model> model;  // null for raw tensors and synthetic problems
  std::optional<models::ModelInfo> info;       // likewise absent
  std::string model_summary;  // "gpt2 · 2 layers · 4 heads · d=32 · context 256"
  models::ModelInput input;
  // The dense forward pass (logits), models only; shared by the stages' copies (the logits alone
  // are N x vocab floats).
  std::shared_ptr<const models::ModelOutput> dense_pass;
  const models::ModelOutput& dense_out() const;
  std::vector<models::Token> tokens;  // text input with byte spans
  std::string notice;                 // truncation notice
  std::vector<std::string> labels;    // [N] display labels of the tokens
  models::Image8 image;               // vision: the input as decoded from the file
  int grid_h = 0, grid_w = 0;         // vision: patch grid

  // Captured attention problems and residual statistics.
  std::shared_ptr<const std::vector<Problem>> problems;  // [L] all heads (shared by copies)
  // A preview (Options::preview_tokens): `problems` hold the selected head alone, which is model
  // head `head_offset`; every head waits in `all_heads` for full_heads().
  std::shared_ptr<const std::vector<Problem>> all_heads;
  int head_offset = 0;
  std::vector<models::ResidualStats> resid;  // [L] residual stream after each layer
  std::vector<int> massive_tokens;           // tokens holding a massive activation

  // Session::ablation: the edits every pass applies, and the ablated model against the plain
  // one (next-token KL, top-1 agreement, perplexities; class agreement for vision).
  std::shared_ptr<const models::Intervention> ablation;
  std::optional<models::EndToEnd> ablation_effect;

  std::shared_ptr<const models::Capture> capture;  // the dense pass's hooks, when Options asked
  std::vector<Panel> panels;  // [0] dense, then the session's variants in order
  double forward_seconds = 0, variants_seconds = 0, metrics_seconds = 0, e2e_seconds = 0;

  const Problem& problem(int layer) const { return (*problems)[size_t(layer)]; }
  int n_layers() const { return problems ? int(problems->size()) : 0; }
  int n_heads() const { return n_layers() ? problem(0).n_heads : 0; }
  int n_tokens() const { return n_layers() ? problem(0).n_k : 0; }
  bool vision() const { return info && info->vision; }
  bool preview() const { return all_heads != nullptr; }
  bool variants_ran() const;
  bool has_metrics() const;  // every panel compared with dense
  bool has_head_metrics() const { return has_metrics() && !panels[0].heads.empty(); }
  bool has_end_to_end() const;
  // The selected layer and head as indices into the problems, clamped (a preview's one head is
  // index 0).
  int layer() const;
  int head() const;
  // The class the dense model predicts (image classifiers), -1 when it predicts none, and its
  // name ("class 7" where the checkpoint names none).
  int predicted_class() const;
  std::string predicted_name() const;
  // Panel index of a spec (canonical or as written); -1 when absent.
  int panel_of(const std::string& spec) const;
};

// Everything but the selection and the view: when two sessions' keys agree, an analysis of one
// serves the other (a layer change needs no new forward pass).
std::string heavy_key(const Session& s);

// Stage 1. Throws attn::Error naming what is wrong (missing model or image, text for a vision
// model, bad variant spec or backend, layer/head out of range, more than 4 variants for the
// GUI is not checked here).
std::shared_ptr<Analysis> open(const Session& s, const std::string& session_path,
                               const Options& o = {});
// Stages 2-4, each on a copy of `a`.
std::shared_ptr<Analysis> run_variants(const Analysis& a, const Options& o = {});
// add_metrics() compares the panels not compared yet (a sweep point reuses the dense panel's).
std::shared_ptr<Analysis> add_metrics(const Analysis& a, const Options& o = {});
std::shared_ptr<Analysis> add_end_to_end(const Analysis& a, const Options& o = {});
// Every stage in order.
std::shared_ptr<Analysis> analyze(const Session& s, const std::string& session_path,
                                  const Options& o = {});
// Every head of a preview: its dense reference on all heads (variants follow with
// run_variants()). Throws Error(InvalidArgument) when `a` is no preview.
std::shared_ptr<Analysis> full_heads(const Analysis& a, const Options& o = {});
// `a` with another selection (same heavy key): nothing is recomputed. A preview serves only its
// own head (Error(InvalidArgument) otherwise).
std::shared_ptr<Analysis> reselect(const Analysis& a, const Session& s);

// Loaded models, shared by every analysis in the process while anyone holds them.
std::shared_ptr<const models::Model> cached_model(const std::string& id_or_dir);

}  // namespace attn::core
