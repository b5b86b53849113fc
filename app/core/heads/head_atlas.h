// The head-role atlas: every role of head_roles.h for every layer x head of a model, measured
// over a corpus rather than one prompt, with bootstrap 95% confidence intervals over the samples.
// `attnscope heads`, the `heads` figure and the app's atlas read one HeadAtlas.
//
// The protocol is models/train/measure_text.py's (the default models' cards):
//   text roles (HeadRole::repeated false, e.g. previous_token, sink): W-token windows, each the
//     model's BOS token + W-1 tokens of the text, K windows at evenly spaced offsets (NumPy's
//     linspace(0, tokens - W, K) truncated), or one window per record of a dataset;
//   repeated-sequence roles (HeadRole::repeated true, e.g. induction): S sequences BOS + R + R,
//     R being `repeat_length` tokens drawn uniformly (seeded) from the tokens of the text (every
//     token but BOS/EOS without text); scores are those of the second copy (head_roles.h);
//     retrieval counts the second copy's copy steps, the needle being R itself with no haystack
//     between the copies.
// The card's own random sequences come from NumPy's generator: the atlas draws its own, so its
// induction numbers agree with the card's in distribution, not digit for digit; given the card's
// probe ids (AtlasInput) they agree exactly.
//
//   core::AtlasOptions o;
//   auto model = core::cached_model("default-text");
//   core::AtlasInput in = core::atlas_input(*model, {text}, o);
//   core::HeadAtlas atlas = core::head_atlas(*model, "default-text", in, o);
//   double prev = atlas.mean("previous_token", 0, 3);   // ~0.90 on held-out KJV
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "models/arch/model.h"

namespace attn::core {

struct AtlasOptions {
  int window = 256;           // tokens per text window, BOS included (capped at the context)
  int windows = 32;           // evenly spaced windows of one text
  int repeat_length = 50;     // length of R in BOS + R + R
  int repeat_sequences = 32;  // how many such sequences
  uint64_t seed = 1234;       // draws R
  int long_range = 32;        // D of the long_range role
  int bootstrap = 1000;       // resamples for the confidence intervals (0 = none)
  int threads = 0;
  const std::atomic<bool>* cancel = nullptr;          // checked between forward passes
  std::function<void(int done, int total)> progress;  // after each forward pass
};

// What the atlas runs the model on.
struct AtlasInput {
  std::vector<std::vector<int32_t>> windows;  // text windows (token ids)
  std::vector<std::vector<int32_t>> repeats;  // prefix + R + R sequences
  int repeat_start = 1;                       // where R starts in them (after BOS)
  int repeat_length = 0;                      // |R|
  int text_tokens = 0;                        // tokens of the text the windows come from
};

// The protocol's inputs from text: one text gives `windows` evenly spaced windows, several
// (dataset records) give one window each, their first W tokens; no text gives the repeated
// sequences alone, drawn from the whole vocabulary. Throws Error(InvalidArgument)
// for a model without tokenizer or text without tokens, Error(Unsupported) for a vision model.
AtlasInput atlas_input(const models::Model& model, const std::vector<std::string>& texts,
                       const AtlasOptions& o);

struct HeadAtlas {
  std::string model;  // as given
  int n_layers = 0, n_heads = 0;
  std::vector<std::string> roles;        // head_roles() names
  std::vector<std::vector<float>> mean;  // [role] f32 [L, H]: mean over the role's samples
  std::vector<std::vector<float>> lo;    // [role] f32 [L, H]: bootstrap 2.5th percentile
  std::vector<std::vector<float>> hi;    // [role] f32 [L, H]: 97.5th percentile
  std::vector<int> samples;              // [role] samples that scored (windows or sequences)
  std::vector<int> offset;               // i32 [L, H]: most-used offset t - k (offset role)
  int windows = 0, window_tokens = 0, text_tokens = 0;
  int repeats = 0, repeat_length = 0;
  // Next-token loss (nats) of the text windows: the mean over windows of each window's mean over
  // its predicted tokens (kLossScope), the baseline of the ablation scan and of `analyze
  // --dataset` alike. NaN without an LM head.
  double text_loss = 0;
  int predicted_tokens = 0;  // tokens the windows predict (each window's length - 1)
  int long_range = 32, bootstrap = 0;
  uint64_t seed = 0;
  double seconds = 0;

  double mean_of(const std::string& role, int layer, int head) const;
  double lo_of(const std::string& role, int layer, int head) const;
  double hi_of(const std::string& role, int layer, int head) const;
};

// One forward pass's role scores, before any averaging: the unit of sharding. A text window
// scores the text roles and gives its offsets and next-token loss; a repeated sequence scores the
// repeated-sequence roles (HeadRole::repeated).
// What every plain baseline loss averages (heads, its ablation scan, analyze --dataset):
// printed and written beside the number.
inline constexpr const char* kLossScope =
    "mean over the windows (records) of each one's mean next-token loss over its predicted "
    "tokens";

struct AtlasSample {
  bool repeat = false;                      // a repeated sequence, else a text window
  int index = 0;                            // its place among the input's windows or sequences
  std::vector<std::vector<double>> scores;  // [role] [L * H]; empty for the other kind's roles
  std::vector<int> offsets;                 // windows: [L * H] the most-used offset t - k
  double nll = 0;                           // windows: summed next-token loss (0 without LM)
  int predicted = 0;                        // windows: tokens predicted
};
struct AtlasSamples {
  std::string model;
  int n_layers = 0, n_heads = 0;
  // The whole input's protocol (a shard's samples are part of it).
  int windows = 0, window_tokens = 0, text_tokens = 0, repeats = 0, repeat_length = 0;
  int long_range = 32;
  uint64_t seed = 0;
  bool lm = false;                   // the model predicts tokens (text_loss is defined)
  std::vector<AtlasSample> samples;  // windows by index, then sequences by index
  double seconds = 0;
};

// Runs the model on every window and sequence (or on `items` alone: indices into the windows
// followed by the sequences, as a shard owns them) and scores every head. Throws
// Error(Unsupported) for vision models and Error(InvalidArgument) for an input with neither
// windows nor sequences or an item outside it.
AtlasSamples collect_atlas(const models::Model& model, const std::string& model_name,
                           const AtlasInput& in, const AtlasOptions& o = {},
                           const std::vector<int>* items = nullptr);
// Means, intervals and offsets of the samples (intervals resample in index order, so merged
// shards give the single run's numbers exactly).
HeadAtlas summarize_atlas(const AtlasSamples& s, int bootstrap);
// collect_atlas() over every item, then summarize_atlas().
HeadAtlas head_atlas(const models::Model& model, const std::string& model_name,
                     const AtlasInput& in, const AtlasOptions& o = {});

// Bootstrap percentile interval of the mean of `x` (B resamples with replacement, seeded):
// {lo, hi}. NaN values are left out; fewer than 2 values give {mean, mean}.
std::pair<double, double> bootstrap_ci(const std::vector<double>& x, int resamples, uint64_t seed,
                                       double level = 0.95);
// The same interval for many series over the same n records at once (each series n values,
// none NaN): one set of B resamples (counts per record, seeded) is shared by every series, so
// the resampled means are one matrix product instead of B x n random draws per series.
std::vector<std::pair<double, double>> bootstrap_cis(
    const std::vector<const std::vector<double>*>& xs, int resamples, uint64_t seed,
    double level = 0.95);

// JSON (version 1): model, protocol, and per role its definition, source and [L][H] mean, lo,
// hi.
nlohmann::json atlas_json(const HeadAtlas& a);

}  // namespace attn::core
