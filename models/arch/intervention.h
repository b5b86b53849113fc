// Interventions on a forward pass (ablation and activation patching, as in TransformerLens): a
// head's output edited before the output projection (the hook blocks.{l}.attn.out, whose
// projection bias is still added), or the residual stream after a block (blocks.{l}.resid) set at
// one position. Layers and heads are 0-based; heads are query heads ("L0H3" = layer 0, head 3).
//
//   Intervention iv;
//   iv.heads.push_back({HeadEdit::Zero, 0, 3});   // zero ablation of L0H3
//   ModelOutput out = model->forward(in, {.intervention = &iv});
//
// Every architecture applies them in ForwardContext (attention.h), so hooks captured in the same
// pass see the edited values. In decoding (Model::decode) a mean is over the pass's tokens.
#pragma once
#include <string>
#include <vector>

namespace attn {
struct Problem;
}  // namespace attn

namespace attn::models {

struct ModelInfo;

struct HeadEdit {
  // Pattern: the head attends with another attention pattern (pattern patching): its output
  // recomputed as P V from `values` f32 [N, N] (rows: queries; each row a distribution over the
  // keys, e.g. the same head's pattern on another input, or a variant's) and this pass's values.
  enum Mode { Zero, Mean, Replace, Pattern };
  Mode mode = Zero;
  int layer = 0, head = 0;
  int position = -1;  // the one position edited; -1 = every position
  // Mean: f32 [d], a mean computed elsewhere (over a dataset); empty = the mean of this head's
  // output over this input's positions. Replace: f32 [N, d], the output to put in its place
  // (patching from another run of the same length). Pattern: f32 [N, N], the pattern.
  std::vector<float> values;
};

struct ResidEdit {
  int layer = 0;              // the residual stream after block `layer`
  int position = 0;           // token position
  std::vector<float> values;  // f32 [hidden]: what the stream holds there afterwards
};

struct Intervention {
  std::vector<HeadEdit> heads;
  std::vector<ResidEdit> resid;

  bool empty() const { return heads.empty() && resid.empty(); }
  // True when some edit applies to layer `layer`'s attention output / residual stream.
  bool edits_heads(int layer) const;
  bool edits_resid(int layer) const;
  // Throws Error(InvalidArgument) naming an edit whose layer, head or position the model or an
  // input of `n` tokens does not have, or whose values have the wrong size (d = head_dim).
  void check(const ModelInfo& info, int n) const;
  // Applies the head edits of `layer` to out f32 [n, H*d] (heads concatenated per token), and
  // to head_out f32 [H, n, d] when non-null (the captured hook).
  void apply_heads(int layer, float* out, int n, int n_heads, int d, float* head_out) const;
  // Applies the pattern edits of `layer` (run before apply_heads): each patched head's output
  // recomputed as P V with the values of `p` (the layer's problem, n queries over n keys), to out
  // f32 [n, H*d], head_out f32 [H, n, d] and the captured pattern f32 [H, n, n] (either may be
  // null). Throws Error(InvalidArgument) in a decode step (queries fewer than keys).
  void apply_patterns(int layer, const Problem& p, float* out, float* head_out,
                      float* pattern) const;
  // Applies the residual edits of `layer` to x f32 [n, hidden].
  void apply_resid(int layer, float* x, int n, int hidden) const;
};

// "L0H3" for messages.
std::string head_name(int layer, int head);

}  // namespace attn::models
