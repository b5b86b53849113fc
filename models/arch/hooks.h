// Hooks: what a forward pass captures, named as in TransformerLens-style tools:
//   blocks.{l}.attn.q        f32 [H, N, d]     queries (after RoPE)
//   blocks.{l}.attn.k        f32 [H_kv, N, d]  keys (after RoPE)
//   blocks.{l}.attn.v        f32 [H_kv, N, d]  values
//   blocks.{l}.attn.scores   f32 [H, N, N]     scaled logits; entries the causal rule hides = -inf
//   blocks.{l}.attn.pattern  f32 [H, N, N]     probabilities
//   blocks.{l}.attn.out      f32 [H, N, d]     per-head outputs, before the output projection
//   blocks.{l}.resid         f32 [N, hidden]   residual stream after block l
// A selection is a comma-separated list of names or globs ('*' matches any run of characters):
// "blocks.*.attn.pattern,blocks.0.resid", or "all".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compute/host_buffer.h"
#include "compute/problem.h"

namespace attn::models {

class HookSelection {
 public:
  HookSelection() = default;
  // Parses a comma-separated list; throws Error(InvalidArgument) for an empty entry or one that
  // can never match a hook name.
  static HookSelection parse(const std::string& list);
  static HookSelection all() { return parse("all"); }

  bool empty() const { return patterns_.empty(); }
  // True when hook `blocks.{layer}.{what}` is wanted (`what`: "attn.q", ..., "resid").
  bool wants(int layer, const std::string& what) const;
  // True when the full hook name ("blocks.3.attn.q") is wanted.
  bool matches(const std::string& name) const;
  // Throws Error(InvalidArgument) naming the pattern when one matches no hook of a model with
  // `n_layers` layers (e.g. "blocks.40.attn.q" on a 12-layer model).
  void check(int n_layers) const;
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

// The kinds of hook of one layer, in the order listed above.
const std::vector<std::string>& hook_kinds();
// True when glob `pattern` matches `name` ('*' = any run of characters).
bool glob_match(const std::string& pattern, const std::string& name);

// What one layer captured; members are empty unless their hook was wanted.
struct LayerCapture {
  int n_heads = 0, d = 0;  // query heads and head dimension of this layer
  bool has_problem = false;
  Problem problem;           // Q f32 [H, N, d], K and V f32 [H_kv, N, d] (after RoPE)
  FloatBuffer scores;        // f32 [H, N, N_k] (N_k = N, or the KV cache's length in decoding)
  FloatBuffer pattern;       // f32 [H, N, N_k]
  FloatBuffer out;           // f32 [H, N, d]
  std::vector<float> resid;  // f32 [N, hidden]
};

// A captured tensor, viewed: valid while the Capture lives.
struct HookTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

class Capture {
 public:
  explicit Capture(HookSelection selection) : selection_(std::move(selection)) {}
  const HookSelection& selection() const { return selection_; }

  int n_tokens = 0;                  // N of the last forward pass
  int hidden = 0;                    // residual width
  std::vector<LayerCapture> layers;  // [n_layers], filled by forward()

  // Layer `l`'s attention as a compute-core problem (all heads, GQA kept), or nullptr when its
  // q/k/v hooks were not captured.
  const Problem* problem(int l) const;
  // Every captured tensor with its hook name and shape, in layer order.
  std::vector<HookTensor> tensors() const;

 private:
  HookSelection selection_;
};

// Residual-stream statistics of one layer (massive activations: Sun et al. 2024, "Massive
// Activations in Large Language Models": a few entries of magnitude > 100 and ~1000x the median).
struct MassiveActivation {
  int token = 0, dim = 0;
  float value = 0;
  float ratio_to_median = 0;  // |value| / median |x| over the whole layer
};
struct ResidualStats {
  std::vector<float> token_norm;           // f32 [N]: L2 norm per token
  std::vector<float> dim_absmax;           // f32 [hidden]: max |x| over tokens per dimension
  float median_abs = 0;                    // median |x| over all entries
  std::vector<MassiveActivation> massive;  // by decreasing |value|
};
// `resid` is f32 [n, hidden]. An entry is massive when |x| >= min_abs and
// |x| >= min_ratio * median |x|.
ResidualStats residual_stats(const std::vector<float>& resid, int n, int hidden,
                             float min_abs = 100.0f, float min_ratio = 1000.0f);

}  // namespace attn::models
