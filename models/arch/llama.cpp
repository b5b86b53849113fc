// Llama family (Llama 2/3, SmolLM, TinyLlama, Qwen2): RMSNorm pre-norm blocks, rotary
// embeddings (with rope_scaling) on Q and K, grouped-query attention, SwiGLU MLP, optional
// q/k/v biases (Qwen2), lm_head tied to the embeddings when tie_word_embeddings says so.
#include <algorithm>
#include <chrono>

#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/architectures.h"
#include "models/arch/attention.h"
#include "models/arch/attention_parts.h"
#include "models/arch/causal_lm.h"
#include "models/arch/layers.h"
#include "models/arch/reverse.h"
#include "models/arch/rope.h"
#include "models/arch/weights.h"

namespace attn::models {
namespace {

class Llama : public CausalLm {
 public:
  Llama(const std::string& dir, const HfConfig& c)
      : ws_(dir),
        rope_(config_int(c, c.head_dim, "head_dim"), c.rope_theta, c.rope_scaling,
              c.max_position_embeddings, c.source) {
    config_ = c;
    fill_text_info(info_, dir, c, Family::Llama);
    if (c.raw.value("use_sliding_window", false)) {
      throw Error(ErrorCode::Unsupported,
                  c.source +
                      ": use_sliding_window is true; sliding-window layers are not "
                      "supported (only full attention)");
    }
    ws_.set_prefixes({"model."});
    const int C = info_.hidden, V = config_int(c, c.vocab_size, "vocab_size");
    const int H = info_.n_heads, Hkv = info_.n_kv_heads, d = info_.head_dim;
    inter_ = config_int(c, c.intermediate_size, "intermediate_size");
    act_ = activation_from_name(c.hidden_act, c.source);
    eps_ = float(c.norm_eps);
    embed_ =
        ws_.get_matrix("embed_tokens.weight", {V, C}, "token embeddings [vocab_size, hidden_size]");
    for (int l = 0; l < info_.n_layers; ++l) {
      const std::string b = "layers." + std::to_string(l) + ".";
      Layer L;
      L.ln1 = ws_.get(b + "input_layernorm.weight", {C});
      L.ln2 = ws_.get(b + "post_attention_layernorm.weight", {C});
      const bool qkv_bias = c.attention_bias;
      L.q = load_linear(ws_, b + "self_attn.q_proj", C, H * d, qkv_bias);
      L.k = load_linear(ws_, b + "self_attn.k_proj", C, Hkv * d, qkv_bias);
      L.v = load_linear(ws_, b + "self_attn.v_proj", C, Hkv * d, qkv_bias);
      L.o = load_linear(ws_, b + "self_attn.o_proj", H * d, C, false);
      L.gate = load_linear(ws_, b + "mlp.gate_proj", C, inter_, false);
      L.up = load_linear(ws_, b + "mlp.up_proj", C, inter_, false);
      L.down = load_linear(ws_, b + "mlp.down_proj", inter_, C, false);
      layers_.push_back(L);
    }
    norm_ = ws_.get("norm.weight", {C});
    lm_head_.in = C;
    lm_head_.out = V;
    lm_head_.w = c.tie_word_embeddings ? ws_.get_matrix_optional("lm_head.weight", {V, C})
                                       : ws_.get_matrix("lm_head.weight", {V, C}, "untied lm_head");
    if (!lm_head_.w) lm_head_.w = embed_;
    info_.vocab = V;
    tokenizer_ = load_tokenizer_if_present(dir);
    ws_.describe(info_);
  }

 private:
  // The forward pass; with a cache, `in` follows its tokens (positions cache->length on) and
  // attends over them, and its keys and values are appended.
  ModelOutput run(const ModelInput& in, KvCache* cache, const ForwardOptions& opt) const override {
    const auto t0 = std::chrono::steady_clock::now();
    check_token_ids(info_, in, lm_head_.out);
    check_embeddings(in, info_.hidden);
    const int N = int(in.ids.size()), C = info_.hidden;
    const int H = info_.n_heads, Hkv = info_.n_kv_heads, d = info_.head_dim;
    ForwardContext ctx(info_, opt, N, in.labels.empty() ? nullptr : &in.labels);
    const int th = ctx.threads;
    std::vector<float> x(size_t(N) * C), h(x.size()), tmp(x.size());
    std::vector<float> q(size_t(N) * H * d), k(size_t(N) * Hkv * d), v(k.size()), att(q.size());
    std::vector<float> gate(size_t(N) * inter_), up(gate.size()), probs;
    ReverseTrace* tr = opt.trace;
    if (tr) {
      tr->blocks.resize(size_t(info_.n_layers));
    }
    for (int t = 0; t < N; ++t) {
      token_embedding(in, embed_, t, C, x.data() + size_t(t) * C);
    }
    if (tr) tr->embeddings = x;
    for (int l = 0; l < info_.n_layers; ++l) {
      const Layer& L = layers_[size_t(l)];
      BlockTrace* b = tr ? &tr->blocks[size_t(l)] : nullptr;
      if (b) b->x_attn = x;
      rms_norm(x.data(), N, C, L.ln1, eps_, h.data(), th);
      linear(h.data(), N, L.q, q.data(), th);
      linear(h.data(), N, L.k, k.data(), th);
      linear(h.data(), N, L.v, v.data(), th);
      Problem p = layer_problem(H, Hkv, N, d, true);
      split_heads(q.data(), N, H * d, 0, H, d, p.q.data(), th);
      split_heads(k.data(), N, Hkv * d, 0, Hkv, d, p.k.data(), th);
      split_heads(v.data(), N, Hkv * d, 0, Hkv, d, p.v.data(), th);
      // A cache rotates them to its policy's positions.
      if (!cache) rotate(p.q.data(), p.k.data(), p, in.positions, false, th);
      // A traced pass writes the pattern straight into the trace (no copy per layer).
      if (b) b->pattern.resize(size_t(H) * N * N);
      causal_attention(ctx, cache, l, p, &rope_, att.data(), b ? b->pattern : probs);
      if (b) {
        b->problem = std::move(p);
        b->att = att;
      }
      linear(att.data(), N, L.o, tmp.data(), th);
      add_inplace(x.data(), tmp.data(), x.size());
      if (b) b->x_mlp = x;
      rms_norm(x.data(), N, C, L.ln2, eps_, h.data(), th);
      linear(h.data(), N, L.gate, gate.data(), th);
      linear(h.data(), N, L.up, up.data(), th);
      if (b) {
        b->pre = gate;
        b->up = up;
      }
      gated_activate(act_, gate.data(), up.data(), gate.size(), th);
      linear(gate.data(), N, L.down, tmp.data(), th);
      add_inplace(x.data(), tmp.data(), x.size());
      ctx.end_block(l, x.data());
    }
    if (tr) tr->final_in = x;
    rms_norm(x.data(), N, C, norm_, eps_, h.data(), th);
    return causal_output(std::move(h), N, C, lm_head_, ctx, t0, cache);
  }

  Reverse reverse(const ModelInput& in, const ReverseTarget& target,
                  const ReverseOptions& o) const override {
    ReverseTrace tr;
    const MatmulScope matmul(o.matmul);  // the backward's products too
    Reverse r = begin_reverse(info_, forward(in, traced(o, tr, target, in)), target, o);
    const auto t0 = std::chrono::steady_clock::now();
    const int N = r.n_tokens, C = info_.hidden;
    const int H = info_.n_heads, Hkv = info_.n_kv_heads, d = info_.head_dim;
    const int th = thread_count(o.threads);
    std::vector<float> g(size_t(N) * C, 0.0f), gh(g.size(), 0.0f);
    std::vector<float> gate(size_t(N) * inter_), up(gate.size());
    std::vector<float> gq(size_t(N) * H * d), gkv(size_t(N) * Hkv * d);
    head_row_grad(lm_head_, r.id, r.foil, 1.0f, gh.data() + size_t(r.position) * C);
    rms_norm_backward(tr.final_in.data(), N, C, norm_, eps_, gh.data(), g.data(), o.rule, false,
                      th);
    for (int l = info_.n_layers - 1; l >= 0; --l) {
      const Layer& L = layers_[size_t(l)];
      const BlockTrace& b = tr.blocks[size_t(l)];
      if (!r.resid_grad.empty()) r.resid_grad[size_t(l)] = g;
      // x += down(act(gate(h)) * up(h)), h = RMSNorm(x_mlp)
      linear_backward(g.data(), N, L.down, gate.data(), false, th);
      gated_backward(act_, b.pre.data(), b.up.data(), gate.data(), gate.data(), up.data(),
                     gate.size(), o.rule, th);
      linear_backward(gate.data(), N, L.gate, gh.data(), false, th);
      linear_backward(up.data(), N, L.up, gh.data(), true, th);
      rms_norm_backward(b.x_mlp.data(), N, C, L.ln2, eps_, gh.data(), g.data(), o.rule, true, th);
      // x += o(attention(rope(q(h)), rope(k(h)), v(h))), h = RMSNorm(x_attn)
      AttentionGrads ag = attention_sublayer_backward(b, L.o, g.data(), l, o.rule, r, th);
      rotate(ag.q.data(), ag.k.data(), b.problem, in.positions, true, th);
      merge_heads(ag.q.data(), N, H, d, gq.data(), H * d, 0);
      linear_backward(gq.data(), N, L.q, gh.data(), false, th);
      merge_heads(ag.k.data(), N, Hkv, d, gkv.data(), Hkv * d, 0);
      linear_backward(gkv.data(), N, L.k, gh.data(), true, th);
      merge_heads(ag.v.data(), N, Hkv, d, gkv.data(), Hkv * d, 0);
      linear_backward(gkv.data(), N, L.v, gh.data(), true, th);
      rms_norm_backward(b.x_attn.data(), N, C, L.ln1, eps_, gh.data(), g.data(), o.rule, true, th);
    }
    return end_reverse(std::move(r), std::move(tr.embeddings), std::move(g), {N, C}, tr, t0);
  }

  // RoPE on queries q f32 [H, N, d] and keys k f32 [H_kv, N, d] shaped as p's, at positions
  // 0..N-1 or at `positions` when given; `inverse` rotates back (the reverse pass).
  void rotate(float* q, float* k, const Problem& p, const std::vector<int32_t>& positions,
              bool inverse, int th) const {
    const int N = p.n_q, d = p.d;
    if (positions.empty()) {
      rope_.apply(q, p.n_heads, N, th, 0, inverse);
      rope_.apply(k, p.n_kv_heads, N, th, 0, inverse);
      return;
    }
    const int32_t* at = positions.data();
    const int longest = *std::max_element(at, at + N) + 1;
    for (int hq = 0; hq < p.n_heads; ++hq)
      rope_.apply_at(q + size_t(hq) * N * d, N, at, longest, inverse);
    for (int hk = 0; hk < p.n_kv_heads; ++hk)
      rope_.apply_at(k + size_t(hk) * N * d, N, at, longest, inverse);
  }

  AttentionParts attention_parts(const ReverseTrace& trace, int layer) const override {
    require(layer >= 0 && layer < info_.n_layers && size_t(layer) < trace.blocks.size() &&
                !trace.blocks[size_t(layer)].x_attn.empty(),
            ErrorCode::InvalidArgument,
            "layer " + std::to_string(layer) + " is not in the traced forward pass");
    const std::vector<float>& x = trace.blocks[size_t(layer)].x_attn;
    const int C = info_.hidden, N = int(x.size() / size_t(C));
    const Layer& L = layers_[size_t(layer)];
    AttentionParts a;
    a.q = L.q;
    a.k = L.k;
    a.v = L.v;
    a.o = L.o;
    a.rope = &rope_;
    a.x.resize(x.size());
    rms_norm(x.data(), N, C, L.ln1, eps_, a.x.data(), 1);
    a.norm = "input_layernorm (RMSNorm)";
    return a;
  }

  struct Layer {
    const float *ln1, *ln2;             // f32 [C]
    Linear q, k, v, o, gate, up, down;  // nn.Linear [out, in]
  };
  WeightStore ws_;
  Rope rope_;
  int inter_ = 0;
  Activation act_ = Activation::Silu;
  float eps_ = 1e-6f;
  Matrix embed_;                 // [V, C], as stored
  const float* norm_ = nullptr;  // f32 [C]
  Linear lm_head_;               // [V, C]
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_llama(const std::string& dir, const HfConfig& config) {
  return std::make_unique<Llama>(dir, config);
}

}  // namespace attn::models
