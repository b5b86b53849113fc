#include "models/arch/causal_lm.h"

#include <algorithm>

namespace attn::models {

ModelOutput CausalLm::forward(const ModelInput& in, const ForwardOptions& opt) const {
  return run(in, nullptr, opt);
}

ModelOutput CausalLm::decode(const std::vector<int32_t>& ids, KvCache& cache,
                             const ForwardOptions& opt) const {
  ModelInput in;
  in.ids = ids;
  return run(in, &cache, opt);
}

void causal_attention(ForwardContext& ctx, KvCache* cache, int layer, Problem& p, const Rope* rope,
                      float* out, std::vector<float>& probs) {
  const int n_layers = ctx.info.n_layers, H = p.n_heads, N = p.n_q;
  bool in_place = false;
  if (cache) {
    in_place = !kv_begin_layer(*cache, layer, n_layers, p, rope, ctx.needs_problem(layer));
    if (cache->policy.needs_scores())
      probs.resize(size_t(H) * N * size_t(kv_layer_length(*cache, layer)));
  }
  float* pr = probs.empty() ? nullptr : probs.data();
  if (in_place)
    kv_attend(*cache, layer, p, out, pr, ctx.threads);
  else
    ctx.attention(layer, p, out, pr);
  if (cache) kv_end_layer(*cache, layer, n_layers, p, pr);
}

ModelOutput causal_output(std::vector<float> hidden, int N, int C, const Linear& lm_head,
                          ForwardContext& ctx, std::chrono::steady_clock::time_point t0,
                          KvCache* cache) {
  ModelOutput out;
  out.n_tokens = N;
  out.hidden = C;
  out.hidden_state = std::move(hidden);
  out.n_logits = lm_head.out;
  const int row = ctx.opt.logits_row;
  if (row >= 0 && row < N && !cache) {
    out.logits_row = row;
    const float* h = out.hidden_state.data() + size_t(row) * C;
    if (!ctx.opt.logits_ids.empty() && !lm_head.in_out) {
      out.logits.assign(size_t(lm_head.out), 0.0f);
      std::vector<float> w(static_cast<size_t>(C));
      for (int id : ctx.opt.logits_ids) {
        if (id < 0 || id >= lm_head.out) continue;  // resolve_target refuses it by name
        matrix_row(lm_head.w, size_t(id), size_t(C), w.data());
        double z = lm_head.b ? lm_head.b[id] : 0.0;
        for (int j = 0; j < C; ++j) z += double(h[j]) * w[size_t(j)];
        out.logits[size_t(id)] = float(z);
      }
    } else {
      out.logits.resize(size_t(lm_head.out));
      linear(h, 1, lm_head, out.logits.data(), ctx.threads);
    }
  } else if (ctx.opt.logits_sink && !cache) {
    // Blocks of vocabulary columns through one reused buffer: the consumer sees every logit
    // and nothing N x vocab is allocated (and, first touched, faulted in).
    const int V = lm_head.out;
    const int cols = lm_head.in_out ? V : std::clamp(ctx.opt.logits_sink_columns, 1, V);
    FloatBuffer block(size_t(N) * cols);
    for (int c0 = 0; c0 < V; c0 += cols) {
      const int c1 = std::min(V, c0 + cols);
      linear(out.hidden_state.data(), N, lm_head.in_out ? lm_head : linear_rows(lm_head, c0, c1),
             block.data(), ctx.threads);
      ctx.opt.logits_sink(c0, c1 - c0, block.data());
    }
  } else {
    out.logits.resize(size_t(N) * lm_head.out);
    linear(out.hidden_state.data(), N, lm_head, out.logits.data(), ctx.threads);
  }
  out.substituted = std::move(ctx.substituted);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cache) kv_end_pass(*cache, N);
  return out;
}

}  // namespace attn::models
