// The attention of one layer inside a forward pass, shared by every architecture: a dense
// softmax kernel of its own (which also yields scores and probabilities for hooks), or a
// compute-core variant in the substituted heads, plus the per-pass state (hooks, substitution,
// the variant's sequence state across layers).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compute/problem.h"
#include "compute/variant.h"
#include "models/arch/layers.h"
#include "models/arch/model.h"

namespace attn::models {

struct BlockTrace;

// State of one forward pass, shared by its layers.
class ForwardContext {
 public:
  // Checks the hook selection and the substitution against the model, sizes the capture and
  // starts the variant's sequence state. `n` is the number of tokens.
  ForwardContext(const ModelInfo& info, const ForwardOptions& opt, int n,
                 const std::vector<std::string>* labels);

  const ModelInfo& info;
  const ForwardOptions& opt;
  const int threads;
  const int n;  // tokens in this pass

  // True when hook blocks.{layer}.{what} is wanted.
  bool wants(int layer, const char* what) const;
  // True when layer `layer`'s attention needs a Problem of its own (an attention hook, a
  // substituted variant or an intervention); otherwise a KV cache may attend in place.
  bool needs_problem(int layer) const;
  // The residual stream x f32 [n, hidden] after block `layer`: residual interventions edit it,
  // then it is stored as blocks.{layer}.resid when wanted.
  void end_block(int layer, float* x);

  // Runs layer `layer`'s attention. `p` holds Q f32 [H, N, d], K, V f32 [H_kv, N, d] (after
  // RoPE), causal flag and scale; `out` receives f32 [N, H*d], heads concatenated per token
  // (the input of the output projection), after any head intervention. `probs`, when non-null,
  // receives the attention probabilities f32 [H, N, N_k] (what a KV-cache policy scores with).
  void attention(int layer, Problem& p, float* out, float* probs = nullptr);

  // Layers that ran the substituted variant, in order.
  std::vector<SubstitutedLayer> substituted;

 private:
  const std::vector<std::string>* labels_;
  std::unique_ptr<SequenceState> seq_;
  MatmulScope matmul_;  // opt.matmul for linear() on this thread while the pass runs
};

// An empty problem for one layer: H query heads over H_kv key/value heads, n tokens, head
// dimension d, scale 1/sqrt(d); q, k, v sized and zeroed.
Problem layer_problem(int n_heads, int n_kv_heads, int n, int d, bool causal);

// Copies heads out of token-major activations: src f32 [n, src_stride], head h's features at
// columns [col0 + h*d, col0 + (h+1)*d), into dst f32 [heads, n, d].
void split_heads(const float* src, int n, int src_stride, int col0, int heads, int d, float* dst,
                 int threads = 1);

// Dense softmax attention of the listed heads of `p` (the oracle-checked path of every model):
// writes out f32 [N, H*d] for those heads and, when non-null, scores f32 [H, N, N_k] (masked
// entries -inf), pattern f32 [H, N, N_k] and per-head outputs head_out f32 [H, N, d]. The N
// queries may be the last N of N_k positions (a decode step over a KV cache).
void dense_attention(const Problem& p, const std::vector<int>& heads, float* out, float* scores,
                     float* pattern, float* head_out, int threads);

// The two sublayers of an encoder block (BERT post-LN, ViT pre-LN), which differ only in where
// their norms sit: each reads `in` f32 [N, C] (x itself, or its norm) and adds its output to the
// residual stream x f32 [N, C].
struct EncoderScratch {
  EncoderScratch(int n, int hidden, int intermediate);
  std::vector<float> q, k, v, att, tmp;  // f32 [N, C]
  std::vector<float> mlp;                // f32 [N, intermediate]
};
// x += o(attention(q(in), k(in), v(in))) over every head, bidirectional, through ctx (hooks,
// substitution, interventions); H heads of dimension d. `trace`, when set, keeps what the
// reverse pass reads (reverse.h).
void encoder_attention(ForwardContext& ctx, int layer, const float* in, const Linear& q,
                       const Linear& k, const Linear& v, const Linear& o, int H, int d,
                       EncoderScratch& s, float* x, BlockTrace* trace = nullptr);
// x += out(act(inter(in))).
void encoder_mlp(const float* in, int n, const Linear& inter, Activation act, const Linear& out,
                 EncoderScratch& s, float* x, int threads, BlockTrace* trace = nullptr);

}  // namespace attn::models
