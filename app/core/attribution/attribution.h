// Attention beside attribution: what each method says the target depended on, for one input and
// one target scalar z (the target's logit before the softmax, or target - foil), with or without
// a variant substituted. Attention-based methods read the forward pass's patterns; gradient
// methods run the models' reverse pass (models/arch/reverse.h); occlusion re-runs the forward.
//
//   core::AttributionRequest q;
//   q.methods = {"rollout", "grad_input", "attnlrp"};
//   q.target.position = 9;                              // text: the row whose logits hold z
//   core::Attribution a = core::attribute(*model, in, q);
//   a.methods[1].scores;                                // f32 [units]: one per token or patch
//
// Units: a text's tokens (causal LMs: 0..position are ranked, later tokens score 0 and are
// excluded), or an image's patches in row-major grid order (the CLS/distillation tokens are not
// units). Scores of every method are signed where the method is, larger = more for the target.
#pragma once
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "models/arch/model.h"
#include "models/arch/reverse.h"
#include "models/arch/substitution.h"

namespace attn::core {

// One attribution method: the table that the CLI's --method, the app's chooser, the figure and
// the README read. Adding a method is one entry in attribution.cpp plus its function.
struct AttributionMethod {
  std::string id;          // "rollout"
  std::string title;       // "Attention rollout"
  std::string source;      // the paper
  std::string definition;  // one line: what the score of a unit is
  bool gradient = false;   // needs the reverse pass (a softmax over the kept keys, see below)
  bool maps = false;       // also gives f32 [L, N, N] per-layer maps
};
const std::vector<AttributionMethod>& attribution_methods();
// Index in attribution_methods(); throws Error(InvalidArgument) listing the ids.
int attribution_method_index(const std::string& id);
// "a,b,c" (or "all") -> ids, each checked; throws Error(InvalidArgument).
std::vector<std::string> parse_attribution_methods(const std::string& list);

// What replaces a unit that is removed (occlusion, faithfulness curves) and where integrated
// gradients start.
struct Baseline {
  enum class Kind { Zero, Token, Mean };
  Kind kind = Kind::Zero;  // zero embedding rows / zero pixels; a token's embedding row; images:
                           // each channel's mean pixel of this image
  int token = -1;          // Kind::Token: the id (-1: the tokenizer's mask, pad or unk token)
};
// "zero" | "token" | "token:ID" | "mean"; throws Error(InvalidArgument) listing the forms.
Baseline parse_baseline(const std::string& text);
std::string baseline_name(const Baseline& b);

struct AttributionRequest {
  std::vector<std::string> methods;                    // ids from attribution_methods()
  models::ReverseTarget target;                        // position, id (-1: top prediction), foil
  const models::Substitution* substitution = nullptr;  // variant in chosen layers/heads
  Baseline baseline;                                   // integrated gradients and occlusion
  int ig_steps = 32;              // integrated gradients: midpoint Riemann steps
  bool occlusion_delete = false;  // text: occlusion removes the token instead
  int flow_map_tokens = 32;       // flow's [L, N, N] maps up to this many tokens
  int map_tokens = 1024;          // other maps up to this many tokens (0 = none)
  int threads = 0;
  // Precision of the matrix products of every pass (models/arch/layers.h): bf16 runs them as
  // AMX tile products where the CPU has them, several times f32's rate.
  models::Matmul matmul = models::Matmul::F32;
  const std::atomic<bool>* cancel = nullptr;  // checked between passes: Error(Cancelled)
};

struct MethodScores {
  std::string method;
  std::vector<float> scores;  // f32 [units]
  std::vector<float> maps;    // f32 [L, N, N] per-layer maps (method-defined) or empty
  std::vector<float> heads;   // f32 [L, H, N]: each head's row at the target (attention,
                              // attn_grad) or empty
  double seconds = 0;
  // AttnLRP: the relevance that reached the input (sum over its elements) against z.
  double relevance_sum = std::numeric_limits<double>::quiet_NaN();
  // Integrated gradients: z(input) - z(baseline), which the scores sum to (completeness).
  double z_difference = std::numeric_limits<double>::quiet_NaN();
  std::string note;  // e.g. why maps were skipped
};

struct Attribution {
  std::string variant = "dense";  // the substituted variant's spec
  std::string matmul = "f32";     // precision of the matrix products (AttributionRequest)
  bool image = false;
  int n_tokens = 0, n_layers = 0, n_heads = 0;
  int first_unit = 0;          // token index of unit 0 (images: the number of special tokens)
  int grid_h = 0, grid_w = 0;  // images: the patch grid
  std::vector<std::string> unit_labels;  // [units]: tokens' text, or "r,c" for patches
  std::vector<int> ranked;  // units that can matter for the target (causal LMs: 0..position)
  int position = 0, id = 0, foil = -1;
  std::string target_label, foil_label;
  double z = 0;
  double probability = 0;  // softmax probability of `id` at `position`
  Baseline baseline;
  std::vector<MethodScores> methods;  // in request order
  double seconds_forward = 0, seconds_reverse = 0;
  size_t reverse_bytes = 0;  // activations the reverse pass kept
  // What occlusion and the faithfulness curves edit: text, the token-embedding rows f32 [N, C]
  // and the baseline's rows f32 [N, C]; images, the baseline's value per channel f32 [C].
  std::vector<float> input_rows, baseline_values;
  int units() const { return int(unit_labels.size()); }
  const MethodScores* find(const std::string& method) const;
};

// Runs every requested method. Throws Error(InvalidArgument) for a bad target (position out of
// range, unknown id or class, a foil equal to the target), an unknown method, a method the model
// or variant cannot do (gradient methods need a softmax over the kept keys: no other normaliser,
// no approximation, no temperature or soft-capping; occlusion by deletion needs text), and
// Error(Cancelled) when *cancel turns true.
Attribution attribute(const models::Model& model, const models::ModelInput& in,
                      const AttributionRequest& q);

// Why `v` cannot run the gradient methods, or "" when it can.
std::string gradient_refusal(const Variant& v);

// The input with units `units` replaced by the baseline (text: their embedding rows; images:
// their patches' pixels), as occlusion and the faithfulness curves run it.
models::ModelInput occluded(const models::ModelInput& in, const Attribution& a,
                            const std::vector<int>& units);
// The forward options of a pass that only needs z: the request's variant and threads, and
// (causal LMs) the target row's logits alone.
models::ForwardOptions target_forward(const Attribution& a, const AttributionRequest& q);
// z and the target's probability for a forward output, as attribute() resolved them.
std::pair<double, double> target_value(const models::ModelOutput& out, const Attribution& a);

}  // namespace attn::core
