// The reverse pass's building blocks: each layer of layers.h and attention.h run backwards, for
// the gradient of one scalar z with respect to the layer's input (weights are fixed: attribution
// needs input gradients only, so no weight gradient is ever formed). f32 in and out, sums in
// double where rows are reduced.
//
// Rule::Lrp runs the same traversal with the rules of AttnLRP (Achtibat et al. 2024) in their
// gradient form: the relevance of a tensor x is x * g(x), and each rule changes how g passes
// one kind of layer:
//   elementwise activations  identity rule: R_in = R_out, so g_in = g_out * act(x) / x;
//   norms                    the 1/std (1/rms) factor is held constant (the identity rule on
//                            the division), which leaves a linear map;
//   softmax                  R_in,i = x_i (R_i - s_i sum_j R_j): with R = s * g this is
//                            x * (the softmax's own gradient), so g passes unchanged;
//   bilinear products        Q K^T, P V and the SwiGLU product: the uniform rule splits R
//                            equally between the two factors, so each gets half its gradient;
//   linear maps and sums     the epsilon rule with epsilon -> 0: the ordinary gradient.
#pragma once
#include <cstddef>
#include <vector>

#include "compute/problem.h"
#include "models/arch/layers.h"

namespace attn::models {

enum class Rule { Gradient, Lrp };
const char* rule_name(Rule r);  // "gradient", "lrp"

// dx f32 [n, l.in] (+)= dy f32 [n, l.out] through the weights of l (the bias has no input).
void linear_backward(const float* dy, int n, const Linear& l, float* dx, bool accumulate,
                     int threads);

// dx f32 [n, c] (+)= d LayerNorm(x)/dx^T dy for y = LayerNorm(x) * gamma + beta.
void layer_norm_backward(const float* x, int n, int c, const float* gamma, float eps,
                         const float* dy, float* dx, Rule rule, bool accumulate, int threads);
// The same for y = x / sqrt(mean(x^2) + eps) * gamma.
void rms_norm_backward(const float* x, int n, int c, const float* gamma, float eps, const float* dy,
                       float* dx, Rule rule, bool accumulate, int threads);

// g f32 [count] (the gradient at act(pre)) becomes the gradient at pre, in place.
void activate_backward(Activation act, const float* pre, float* g, size_t count, Rule rule,
                       int threads);
// For y = act(gate) * up: dgate and dup f32 [count] from dy (dgate may alias dy).
void gated_backward(Activation act, const float* gate, const float* up, const float* dy,
                    float* dgate, float* dup, size_t count, Rule rule, int threads);

// Attention run backwards. `p` holds the forward's q, k, v f32 [H, N, d] / [H_kv, N, d] (after
// RoPE) and its scale; `pattern` f32 [H, N, N] the probabilities it used (the dense softmax, or
// what a substituted variant attended to: its gradient is taken as that of a softmax over the
// variant's support, exact for every masked-softmax variant). d_out f32 [N, H*d] is the
// gradient at the concatenated head outputs. Writes dq f32 [H, N, d], dk, dv f32 [H_kv, N, d]
// (grouped heads summed) and, when non-null, d_pattern f32 [H, N, N] (dz/dA).
void attention_backward(const Problem& p, const float* pattern, const float* d_out, float* dq,
                        float* dk, float* dv, float* d_pattern, Rule rule, int threads);

// Token-major activations from heads: dst f32 [n, dst_stride] at columns col0 + h*d gets
// src f32 [heads, n, d] (the inverse of split_heads).
void merge_heads(const float* src, int n, int heads, int d, float* dst, int dst_stride, int col0);

}  // namespace attn::models
