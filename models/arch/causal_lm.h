// What the causal language models (gpt2.cpp, llama.cpp) share around their blocks: forward()
// and decode() as one pass with or without a KV cache, each layer's attention over that cache,
// and the logits at the end. What differs (embeddings, norms, projections, the MLP) stays in
// the architecture's file.
#pragma once
#include <chrono>
#include <vector>

#include "compute/problem.h"
#include "models/arch/attention.h"
#include "models/arch/kv_cache.h"
#include "models/arch/layers.h"
#include "models/arch/model.h"
#include "models/arch/rope.h"

namespace attn::models {

class CausalLm : public Model {
 public:
  ModelOutput forward(const ModelInput& in, const ForwardOptions& opt) const final;
  ModelOutput decode(const std::vector<int32_t>& ids, KvCache& cache,
                     const ForwardOptions& opt) const final;

 protected:
  // The forward pass. With a cache, `in` follows its tokens (positions from
  // kv_input_positions) and attends over them, and its keys and values are appended.
  virtual ModelOutput run(const ModelInput& in, KvCache* cache,
                          const ForwardOptions& opt) const = 0;
};

// Layer `layer`'s attention of a causal pass: with a cache, over the cache's entries and p's
// (kv_begin_layer .. kv_end_layer, reading the cache in place when no hook, variant or
// intervention needs a Problem; `rope`, or null for learned positions, rotates q and k to the
// positions the policy gives them), else ctx.attention over p alone. out f32 [N, H*d]; `probs`
// is resized to the probabilities a scoring policy reads (f32 [H, N, cache length]).
void causal_attention(ForwardContext& ctx, KvCache* cache, int layer, Problem& p, const Rope* rope,
                      float* out, std::vector<float>& probs);

// The end of a causal pass: `hidden` f32 [N, C] (after the final norm) becomes the output's
// hidden state, times lm_head its logits f32 [N, vocab]; the pass's substituted layers and
// time since t0 come along, and the cache (if any) ends its pass.
ModelOutput causal_output(std::vector<float> hidden, int N, int C, const Linear& lm_head,
                          ForwardContext& ctx, std::chrono::steady_clock::time_point t0,
                          KvCache* cache);

}  // namespace attn::models
