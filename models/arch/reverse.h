// The reverse pass of a whole model: the gradient of one target scalar z with respect to the
// input and every hook point, through the model's own forward pass (with a variant substituted
// where asked).
//
//   ReverseTarget t;  t.position = 5;  t.id = 262;        // z = logit of token 262 at position 5
//   Reverse r = model->reverse(in, t, {});
//   r.input_grad;                                         // dz / d token-embedding rows [N, C]
//
// Definitions users and tests rely on:
//   text    the input is each token's embedding row before position (and type) embeddings are
//           added; `input` holds those rows and `input_grad` dz/d them, f32 [N, hidden];
//   images  the input is the preprocessed pixels, f32 [channels, height, width] as the model
//           takes them (a patch's attribution sums its pixels and channels);
//   z       the target's logit before the softmax: token `id` at `position` (causal LMs: the
//           next-token logits there; BERT: the MLM logits there) or class `id` (image
//           classifiers), minus the foil's logit when a foil is given.
#pragma once
#include <chrono>
#include <cstddef>
#include <vector>

#include "compute/problem.h"
#include "models/arch/backward.h"
#include "models/arch/model.h"

namespace attn::models {

struct ReverseTarget {
  int position = -1;  // text: the position whose logits hold z (-1: the last); images: unused
  int id = -1;        // token id or class (-1: the forward pass's top prediction there)
  int foil = -1;      // z = logit[id] - logit[foil] when >= 0
};

struct ReverseOptions {
  const Substitution* substitution = nullptr;  // variant in chosen layers/heads (null: dense)
  int threads = 0;
  Rule rule = Rule::Gradient;  // Rule::Lrp: AttnLRP's relevance rules (backward.h)
  bool keep_patterns = true;   // pattern and dz/dA per layer
  bool keep_resid = false;     // dz/d residual stream after each block
  bool keep_heads = false;     // each head's output and dz/d it
  // Causal LMs: the forward computes the logits of the target's row only (ModelOutput::
  // logits_row); with target_ids_only and a given target id, only its own and the foil's logits
  // in that row (the others 0): what repeated passes (integrated gradients' steps) need.
  bool target_logits_only = false;
  bool target_ids_only = false;
  Matmul matmul = Matmul::F32;  // precision of the matrix products, forward and backward
};

struct Reverse {
  ModelOutput output;  // the forward pass (logits, hidden state)
  Rule rule = Rule::Gradient;
  int position = 0, id = 0, foil = -1;
  double z = 0;  // the target scalar
  int n_tokens = 0, hidden = 0, n_layers = 0, n_heads = 0, head_dim = 0;
  // Text: f32 [N, hidden]; images: f32 [channels, height, width] (input_shape says which).
  std::vector<float> input, input_grad;
  std::vector<int> input_shape;
  // Per layer when kept: A f32 [H, N, N] and dz/dA; dz/d stream after block l f32 [N, hidden];
  // head outputs f32 [H, N, d] and dz/d them.
  std::vector<std::vector<float>> pattern, pattern_grad, resid_grad, head_out, head_out_grad;
  double seconds_forward = 0, seconds_backward = 0;
  size_t trace_bytes = 0;  // activations the reverse pass kept from the forward pass
};

// What a forward pass keeps for its reverse pass (filled when ForwardOptions::trace is set).
struct BlockTrace {
  std::vector<float> x_attn, x_mlp;      // stream entering each sublayer (before its pre-norm)
  std::vector<float> sum_attn, sum_mlp;  // post-LN (BERT): the sums entering each norm
  Problem problem;                       // q, k (after RoPE), v
  std::vector<float> pattern;            // f32 [H, N, N] what the heads attended to
  std::vector<float> att;                // f32 [N, H*d] concatenated head outputs
  std::vector<float> pre, up;            // MLP pre-activation (the gate for gated MLPs), up
};
struct ReverseTrace {
  std::vector<BlockTrace> blocks;
  std::vector<float> embeddings;              // text: token-embedding rows f32 [N, C]
  std::vector<float> embed_sum;               // BERT: the sum entering the embedding LayerNorm
  std::vector<float> final_in;                // stream entering the final norm (pre-LN models)
  std::vector<float> head_pre, head_norm_in;  // BERT MLM transform: pre-activation, LN input
  size_t bytes() const;
};

// out[0, C) = token t's embedding row: in.embeddings' row when given, else `table`'s row for
// in.ids[t] (widened from the stored dtype). check_embeddings throws Error(InvalidArgument) when
// in.embeddings is not f32 [N, C].
void token_embedding(const ModelInput& in, const Matrix& table, int t, int C, float* out);
void check_embeddings(const ModelInput& in, int C);

// Resolves the target against the forward output (-1s filled in) and returns z. Throws
// Error(InvalidArgument) for a position out of range, an unknown id or class, a foil equal to
// the target, or a model without logits.
double resolve_target(const ModelInfo& info, const ModelOutput& out, ReverseTarget& t);

// Starts a Reverse from a traced forward: target resolved, z set, the options' layers sized.
Reverse begin_reverse(const ModelInfo& info, ModelOutput out, const ReverseTarget& t,
                      const ReverseOptions& o);

// The forward options of the traced forward pass a reverse pass starts with.
ForwardOptions traced(const ReverseOptions& o, ReverseTrace& tr, const ReverseTarget& t,
                      const ModelInput& in);
// Ends a reverse pass: the input and dz/d it (shaped `shape`), the backward time since t0 and
// the trace's size.
Reverse end_reverse(Reverse r, std::vector<float> input, std::vector<float> grad,
                    std::vector<int> shape, const ReverseTrace& tr,
                    std::chrono::steady_clock::time_point t0);

// dz/d(row `pos` of the hidden state) for a linear head: row id minus row foil of l's weights
// (nn.Linear [out, in] layout), times `scale`, added into g f32 [in].
void head_row_grad(const Linear& l, int id, int foil, float scale, float* g);

// The attention sublayer run backwards: from dz/d the output projection's output (`g_out`
// f32 [N, C]) to dz/d q, k, v, head-major f32 [H, N, d] / [H_kv, N, d] (at the rotated q and k:
// callers with rotary embeddings rotate them back). Records the pattern, its gradient and the
// heads' outputs into r at `layer` as r's kept fields ask.
struct AttentionGrads {
  std::vector<float> q, k, v;  // head-major f32 [H, N, d], [H_kv, N, d]
};
AttentionGrads attention_sublayer_backward(const BlockTrace& b, const Linear& o, const float* g_out,
                                           int layer, Rule rule, Reverse& r, int threads);

// The encoder sublayers of attention.h run backwards: g_in f32 [N, C] (+)= dz/d `in` for
// x += o(attention(q(in), k(in), v(in))) and x += out(act(inter(in))), from g_x = dz/d x.
void encoder_attention_backward(const BlockTrace& b, const Linear& q, const Linear& k,
                                const Linear& v, const Linear& o, const float* g_x, float* g_in,
                                bool accumulate, int layer, Rule rule, Reverse& r, int threads);
void encoder_mlp_backward(const BlockTrace& b, const Linear& inter, Activation act,
                          const Linear& out, const float* g_x, float* g_in, bool accumulate,
                          Rule rule, int threads);

}  // namespace attn::models
