// Interventions through the analysis core: head ablation (`attnscope analyze --ablate`), the
// single-head ablation scan over a corpus, and activation patching on a clean/corrupt pair
// (`attnscope patch`). The edits themselves are models/arch/intervention.h's, applied inside the
// forward pass of every architecture.
//
// Activation patching (Meng et al. 2022, "Locating and Editing Factual Associations in GPT";
// Wang et al. 2022; TransformerLens's patching): run the clean and the corrupt input (same
// length), then the corrupt one again with one piece taken from the clean run, and measure
//   LD = logit(target) - logit(foil) at the last position,
//   effect = (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt)
// (1: the piece restores the clean behaviour alone; 0: it changes nothing). Pieces:
//   heads      head h's output at layer l (blocks.l.attn.out, every position), per layer x head
//   positions  the residual stream after block l at position t (blocks.l.resid), per layer x
//              position
//   patterns   head h's attention pattern at layer l (blocks.l.attn.pattern), the corrupt run's
//              values kept: pattern patching, per layer x head
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "app/core/export/figure_data.h"
#include "models/arch/intervention.h"
#include "models/arch/model.h"
#include "models/arch/substitution.h"

namespace attn::core {

// "0.3,1.2" or "L0H3,L1H2" -> {{0, 3}, {1, 2}}; throws Error(InvalidArgument) naming the bad
// entry. Ranges are checked against a model by check_heads().
std::vector<std::pair<int, int>> parse_heads(const std::string& list);
// Throws Error(InvalidArgument) for a layer or head the model does not have.
void check_heads(const std::vector<std::pair<int, int>>& heads, const models::ModelInfo& info);
// "zero" | "mean" | "resample" | "pattern" -> the edit's mode (resample: Replace with another
// input's output; pattern: attend with another input's pattern; see resample_ablation); throws
// Error(InvalidArgument) listing the modes.
models::HeadEdit::Mode ablation_mode(const std::string& name);

// The edits that ablate `heads` (every position).
models::Intervention ablation(const std::vector<std::pair<int, int>>& heads,
                              models::HeadEdit::Mode mode);
// Resample ablation: each listed head's output replaced by the same head's output on another
// input `source` (run here; the hook blocks.L.attn.out), which must have the length of the input
// it is applied to (`n`; Error(InvalidArgument) naming both lengths otherwise). With `pattern`,
// pattern patching instead: each head attends with its attention pattern on `source`
// (blocks.L.attn.pattern) over this input's values.
models::Intervention resample_ablation(const models::Model& model,
                                       const std::vector<std::pair<int, int>>& heads,
                                       const std::vector<int32_t>& source, int n, int threads = 0,
                                       bool pattern = false);

// A forward pass with an intervention beside the plain one on the same input; `hooks` (may be
// empty) are captured in the intervened pass.
struct InterventionRun {
  models::ModelOutput plain, edited;
  std::shared_ptr<models::Capture> capture;  // the edited pass's hooks (null when none were asked)
  models::EndToEnd effect;                   // edited vs plain: next-token KL, top-1, perplexity
};
InterventionRun run_intervention(const models::Model& model, const models::ModelInput& in,
                                 const models::Intervention& iv, const std::string& hooks = "",
                                 int threads = 0);

// Head ablation on one input (`attnscope analyze --ablate`): the input prepared for the model
// (a text encoded, or token ids checked), the edits built (zero or mean ablation; resample and
// pattern take the heads' outputs or patterns from `source_text`, which must encode to the
// input's length), then the plain and the ablated passes with `hooks` captured in the ablated
// one. Encoding errors are thrown as encode_for_model() / ids_for_model() throw them.
struct HeadAblationRequest {
  std::vector<std::pair<int, int>> heads;  // from parse_heads(), checked by check_heads()
  std::string mode = "zero";               // "zero" | "mean" | "resample" | "pattern"
  bool use_ids = false;                    // the input is `ids`; otherwise `text`
  std::string text, text_name = "text";    // text_name names the text in messages
  std::vector<int32_t> ids;
  std::string source_text, source_name = "the other input";  // resample and pattern only
  std::string hooks;                                         // captured; "" none
  int threads = 0;
  // Called with the input's truncation notice when there is one, as soon as it is known (before
  // the other input is encoded); may be empty.
  std::function<void(const std::string&)> notice;
};
struct HeadAblation {
  std::string heads;         // "L0H3,L1H2"
  models::ModelInput input;  // the input's ids and labels
  // Resample and pattern: the other input's length. When it differs from the input's, nothing
  // is run and `run` stays empty.
  size_t source_tokens = 0;
  bool length_mismatch = false;
  InterventionRun run;
};
HeadAblation ablate_heads(const models::Model& model, const HeadAblationRequest& r);
// The ablated pass's hooks (those `hooks` selects) written to `dir` by dump_forward(); returns
// the files written.
std::vector<std::string> dump_head_ablation(const std::string& dir, const HeadAblation& a,
                                            const std::string& hooks);

// Mean next-token loss (nats) of a causal LM's logits f32 [N, vocab] on ids [N].
double next_token_loss(const models::ModelOutput& out, const std::vector<int32_t>& ids);

// Single-head ablation over a corpus: each head ablated alone on every window, the rise of the
// mean next-token loss over the windows. Zero or mean ablation; with `corpus_mean` the mean is
// the head's output averaged over every position of every window (the dataset's mean) instead
// of over the window's own positions.
struct AblationScan {
  std::string mode;  // "zero" | "mean" | "corpus-mean"
  int n_layers = 0, n_heads = 0, windows = 0;
  double loss = 0;            // without ablation
  std::vector<float> delta;   // f32 [L, H]: loss with the head ablated - loss
  std::vector<float> lo, hi;  // f32 [L, H]: bootstrap 95% interval of delta over the windows
};
// Every window's losses, before averaging: the unit of sharding.
struct AblationSamples {
  std::string mode;
  int n_layers = 0, n_heads = 0, windows = 0;  // windows: of the whole input
  std::vector<int> index;                      // [window] its place in the input, ascending
  std::vector<double> base;                    // [window] loss without ablation
  std::vector<std::vector<double>> delta;      // [L * H][window] loss with the head ablated - base
};
// The scan on `items` of the windows alone (a shard's; null = every window). `cancel` is checked
// before each forward pass (Error(Cancelled)). A corpus mean is
// over every window, so that each shard ablates with the same mean.
AblationSamples ablation_samples(const models::Model& model,
                                 const std::vector<std::vector<int32_t>>& windows,
                                 models::HeadEdit::Mode mode, int threads = 0,
                                 bool corpus_mean = false, const std::vector<int>* items = nullptr,
                                 const std::atomic<bool>* cancel = nullptr);
// Means and intervals (resampling in index order: merged shards give the single run's numbers).
AblationScan summarize_ablation(const AblationSamples& s, int bootstrap = 1000,
                                uint64_t seed = 1234);
// ablation_samples() over every window, then summarize_ablation().
AblationScan ablation_scan(const models::Model& model,
                           const std::vector<std::vector<int32_t>>& windows,
                           models::HeadEdit::Mode mode, int threads = 0, int bootstrap = 1000,
                           uint64_t seed = 1234, bool corpus_mean = false,
                           const std::atomic<bool>* cancel = nullptr);

// The per-head means of every record's head outputs (the hook blocks.L.attn.out): f32
// [L * H][head_dim], over every position of every token sequence. What corpus-mean ablation
// puts in place of a head.
std::vector<std::vector<float>> head_output_means(const models::Model& model,
                                                  const std::vector<std::vector<int32_t>>& seqs,
                                                  int threads = 0);

struct PatchOptions {
  std::string over = "heads";  // "heads" | "positions" | "patterns"
  int threads = 0;
  const std::atomic<bool>* cancel = nullptr;  // checked between passes; throws Error(Cancelled)
};

struct PatchResult {
  std::string over;
  int rows = 0, cols = 0;                                 // layers x heads, or layers x positions
  std::vector<float> effect;                              // f32 [rows, cols]
  double ld_clean = 0, ld_corrupt = 0;                    // logit differences of the two runs
  int32_t target = 0, foil = 0;                           // token ids
  std::string target_text, foil_text;                     // as given
  std::vector<std::string> clean_labels, corrupt_labels;  // [N] token pieces
  int records = 1;                                        // pairs averaged (datasets)
  std::vector<float> lo, hi;  // f32 [rows, cols]: bootstrap 95% interval over the pairs
};

// Throws Error(InvalidArgument) for inputs of different lengths (naming both), ids outside the
// vocabulary, a model without token logits, an unknown `over`, or clean and corrupt runs whose
// logit differences are equal (the effect would divide by zero).
PatchResult activation_patching(const models::Model& model, const std::vector<int32_t>& clean,
                                const std::vector<int32_t>& corrupt, int32_t target, int32_t foil,
                                const PatchOptions& o = {});

// One cell of a patching grid applied alone (what a click on the app's grid shows): the corrupt
// run with that one piece from the clean run, its logit difference and effect (equal to the
// grid's cell), and the five most likely next tokens at the last position of the clean, corrupt
// and patched runs. Throws as activation_patching() does, and for a cell outside the grid.
struct PatchCell {
  std::string over;
  int layer = 0, index = 0;  // layer, and head or position
  double ld_clean = 0, ld_corrupt = 0, ld_patched = 0, effect = 0;
  std::vector<std::pair<std::string, double>> top_clean, top_corrupt, top_patched;
};
PatchCell patch_cell(const models::Model& model, const std::vector<int32_t>& clean,
                     const std::vector<int32_t>& corrupt, int32_t target, int32_t foil,
                     const std::string& over, int layer, int index, int threads = 0);

// Activation patching over a dataset of pairs: the mean effect per cell (and mean logit
// differences) with bootstrap 95% intervals over the pairs. Over positions every pair must have
// the same length (Error(InvalidArgument) naming the first that does not); a pair whose runs
// give equal logit differences is an error naming it (`names[i]`, may be empty).
struct PatchRecord {
  std::vector<int32_t> clean, corrupt;
  int32_t target = 0, foil = 0;
  std::string name;    // "pairs.jsonl:3" for messages
  int64_t index = -1;  // its place in the whole dataset (shards); -1 = its place in the list
};
PatchResult patch_dataset(const models::Model& model, const std::vector<PatchRecord>& records,
                          const PatchOptions& o = {}, int bootstrap = 1000, uint64_t seed = 1234);

// The same in two steps, for `patch --dataset --shard` and `--merge`: each pair's own grid, then
// the means and intervals over the pairs in index order (merged shards give the single run's
// numbers exactly).
struct PatchRun {
  int64_t index = 0;
  std::string name;
  PatchResult result;
};
std::vector<PatchRun> patch_runs(const models::Model& model,
                                 const std::vector<PatchRecord>& records,
                                 const PatchOptions& o = {});
PatchResult summarize_patch_runs(const std::vector<PatchRun>& runs, int bootstrap = 1000,
                                 uint64_t seed = 1234);
// A shard file: the runs with the model and dataset they came from. Reading throws Error(Format)
// naming `source`; merging throws Error(Format) for shards of another model, dataset or target
// (`over`, grid shape) and for a pair in two shards.
struct PatchShard {
  std::string model, dataset, over;
  std::vector<PatchRun> runs;
};
nlohmann::json patch_shard_json(const PatchShard& s);
PatchShard patch_shard_from_json(const nlohmann::json& j, const std::string& source);
PatchShard merge_patch_shards(const std::vector<PatchShard>& shards);

// The one token id of `text` (" Paris"); throws Error(InvalidArgument) when it is not exactly
// one token, naming the pieces.
int32_t single_token(const models::Model& model, const std::string& text, const std::string& what);

nlohmann::json patch_json(const PatchResult& r);
nlohmann::json ablation_json(const AblationScan& s);
// Figure data: the effect grid (diverging around 0).
FigureData patch_figure(const PatchResult& r, const std::string& model_name);
// Figure data: the loss rise of each head ablated alone, per layer x head, with its interval.
FigureData ablation_figure(const AblationScan& s, const std::string& model_name);

}  // namespace attn::core
