// GPT-2 (gpt2, distilgpt2, ...): learned positions, pre-LN blocks, fused QKV in Conv1D layout
// ([in, out]), gelu_new MLP, final LayerNorm, lm_head tied to the token embeddings.
#include <chrono>

#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/architectures.h"
#include "models/arch/attention.h"
#include "models/arch/attention_parts.h"
#include "models/arch/causal_lm.h"
#include "models/arch/layers.h"
#include "models/arch/reverse.h"
#include "models/arch/weights.h"

namespace attn::models {
namespace {

class Gpt2 : public CausalLm {
 public:
  Gpt2(const std::string& dir, const HfConfig& c) : ws_(dir) {
    config_ = c;
    fill_text_info(info_, dir, c, Family::Gpt2);
    ws_.set_prefixes({"transformer."});
    const int C = info_.hidden, V = config_int(c, c.vocab_size, "vocab_size");
    const int P = info_.max_tokens, I = config_int(c, c.intermediate_size, "n_inner");
    require(info_.n_heads * info_.head_dim == C, ErrorCode::Format,
            c.source + ": GPT-2 needs n_embd = n_head * head_dim");
    inter_ = I;
    act_ = activation_from_name(c.hidden_act, c.source);
    eps_ = float(c.norm_eps);
    wte_ = ws_.get_matrix("wte.weight", {V, C}, "token embeddings [vocab_size, n_embd]");
    wpe_ = ws_.get("wpe.weight", {P, C}, "position embeddings [n_positions, n_embd]");
    for (int l = 0; l < info_.n_layers; ++l) {
      const std::string b = "h." + std::to_string(l) + ".";
      Layer L;
      L.ln1_g = ws_.get(b + "ln_1.weight", {C});
      L.ln1_b = ws_.get(b + "ln_1.bias", {C});
      L.ln2_g = ws_.get(b + "ln_2.weight", {C});
      L.ln2_b = ws_.get(b + "ln_2.bias", {C});
      L.qkv = load_linear(ws_, b + "attn.c_attn", C, 3 * C, true, true);
      L.proj = load_linear(ws_, b + "attn.c_proj", C, C, true, true);
      L.fc = load_linear(ws_, b + "mlp.c_fc", C, I, true, true);
      L.fc_proj = load_linear(ws_, b + "mlp.c_proj", I, C, true, true);
      layers_.push_back(L);
    }
    lnf_g_ = ws_.get("ln_f.weight", {C});
    lnf_b_ = ws_.get("ln_f.bias", {C});
    // lm_head is tied to wte unless the checkpoint stores its own.
    lm_head_.in = C;
    lm_head_.out = V;
    lm_head_.w = ws_.get_matrix_optional("lm_head.weight", {V, C});
    if (!lm_head_.w || c.tie_word_embeddings) lm_head_.w = wte_;
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
    const int N = int(in.ids.size()), C = info_.hidden, H = info_.n_heads, d = info_.head_dim;
    // Positions: 0..N-1, or what the cache policy gives the new tokens (checked first, so a
    // refused pass leaves the cache as it was).
    std::vector<int> pos(static_cast<size_t>(N));
    for (int t = 0; t < N; ++t) pos[size_t(t)] = in.positions.empty() ? t : in.positions[size_t(t)];
    if (cache) pos = kv_input_positions(*cache, N, info_.max_tokens);
    ForwardContext ctx(info_, opt, N, in.labels.empty() ? nullptr : &in.labels);
    const int th = ctx.threads;
    std::vector<float> x(size_t(N) * C), h(x.size()), att(x.size()), tmp(x.size());
    std::vector<float> qkv(size_t(N) * 3 * C), mlp(size_t(N) * inter_), probs;
    ReverseTrace* tr = opt.trace;
    if (tr) {
      tr->blocks.resize(size_t(info_.n_layers));
      tr->embeddings.resize(x.size());
    }
    for (int t = 0; t < N; ++t) {
      float* e = x.data() + size_t(t) * C;
      token_embedding(in, wte_, t, C, e);
      if (tr) std::copy_n(e, C, tr->embeddings.data() + size_t(t) * C);
      const float* p = wpe_ + size_t(pos[size_t(t)]) * C;
      for (int j = 0; j < C; ++j) e[j] += p[j];
    }
    for (int l = 0; l < info_.n_layers; ++l) {
      const Layer& L = layers_[size_t(l)];
      BlockTrace* b = tr ? &tr->blocks[size_t(l)] : nullptr;
      if (b) b->x_attn = x;
      layer_norm(x.data(), N, C, L.ln1_g, L.ln1_b, eps_, h.data(), th);
      linear(h.data(), N, L.qkv, qkv.data(), th);
      Problem p = layer_problem(H, H, N, d, true);
      split_heads(qkv.data(), N, 3 * C, 0, H, d, p.q.data(), th);
      split_heads(qkv.data(), N, 3 * C, C, H, d, p.k.data(), th);
      split_heads(qkv.data(), N, 3 * C, 2 * C, H, d, p.v.data(), th);
      // A traced pass writes the pattern straight into the trace (no copy per layer).
      if (b) b->pattern.resize(size_t(H) * N * N);
      causal_attention(ctx, cache, l, p, nullptr, att.data(), b ? b->pattern : probs);
      if (b) {
        b->problem = std::move(p);
        b->att = att;
      }
      linear(att.data(), N, L.proj, tmp.data(), th);
      add_inplace(x.data(), tmp.data(), x.size());
      if (b) b->x_mlp = x;
      layer_norm(x.data(), N, C, L.ln2_g, L.ln2_b, eps_, h.data(), th);
      if (b) {  // the pre-activation stays in the trace: no copy of it
        b->pre.resize(mlp.size());
        linear(h.data(), N, L.fc, b->pre.data(), th);
        activate(act_, b->pre.data(), mlp.data(), mlp.size(), th);
      } else {
        linear(h.data(), N, L.fc, mlp.data(), th);
        activate(act_, mlp.data(), mlp.size(), th);
      }
      linear(mlp.data(), N, L.fc_proj, tmp.data(), th);
      add_inplace(x.data(), tmp.data(), x.size());
      ctx.end_block(l, x.data());
    }
    if (tr) tr->final_in = x;
    layer_norm(x.data(), N, C, lnf_g_, lnf_b_, eps_, h.data(), th);
    return causal_output(std::move(h), N, C, lm_head_, ctx, t0, cache);
  }

  Reverse reverse(const ModelInput& in, const ReverseTarget& target,
                  const ReverseOptions& o) const override {
    ReverseTrace tr;
    const MatmulScope matmul(o.matmul);  // the backward's products too
    Reverse r = begin_reverse(info_, forward(in, traced(o, tr, target, in)), target, o);
    const auto t0 = std::chrono::steady_clock::now();
    const int N = r.n_tokens, C = info_.hidden, H = info_.n_heads, d = info_.head_dim;
    const int th = thread_count(o.threads);
    std::vector<float> g(size_t(N) * C, 0.0f), gh(g.size(), 0.0f);
    std::vector<float> gm(size_t(N) * inter_), gqkv(size_t(N) * 3 * C);
    head_row_grad(lm_head_, r.id, r.foil, 1.0f, gh.data() + size_t(r.position) * C);
    layer_norm_backward(tr.final_in.data(), N, C, lnf_g_, eps_, gh.data(), g.data(), o.rule, false,
                        th);
    for (int l = info_.n_layers - 1; l >= 0; --l) {
      const Layer& L = layers_[size_t(l)];
      const BlockTrace& b = tr.blocks[size_t(l)];
      if (!r.resid_grad.empty()) r.resid_grad[size_t(l)] = g;
      linear_backward(g.data(), N, L.fc_proj, gm.data(), false, th);
      activate_backward(act_, b.pre.data(), gm.data(), gm.size(), o.rule, th);
      linear_backward(gm.data(), N, L.fc, gh.data(), false, th);
      layer_norm_backward(b.x_mlp.data(), N, C, L.ln2_g, eps_, gh.data(), g.data(), o.rule, true,
                          th);
      const AttentionGrads ag = attention_sublayer_backward(b, L.proj, g.data(), l, o.rule, r, th);
      merge_heads(ag.q.data(), N, H, d, gqkv.data(), 3 * C, 0);
      merge_heads(ag.k.data(), N, H, d, gqkv.data(), 3 * C, C);
      merge_heads(ag.v.data(), N, H, d, gqkv.data(), 3 * C, 2 * C);
      linear_backward(gqkv.data(), N, L.qkv, gh.data(), false, th);
      layer_norm_backward(b.x_attn.data(), N, C, L.ln1_g, eps_, gh.data(), g.data(), o.rule, true,
                          th);
    }
    return end_reverse(std::move(r), std::move(tr.embeddings), std::move(g), {N, C}, tr, t0);
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
    a.q = a.k = a.v = L.qkv;  // fused [C, 3C]: q, k, v at columns 0, C, 2C
    a.k_col0 = C;
    a.v_col0 = 2 * C;
    a.o = L.proj;
    a.x.resize(x.size());
    layer_norm(x.data(), N, C, L.ln1_g, L.ln1_b, eps_, a.x.data(), 1);
    a.norm = "ln_1 (LayerNorm)";
    return a;
  }

  struct Layer {
    const float *ln1_g, *ln1_b, *ln2_g, *ln2_b;  // f32 [C]
    Linear qkv, proj, fc, fc_proj;               // Conv1D [in, out]
  };
  WeightStore ws_;
  int inter_ = 0;
  Activation act_ = Activation::GeluTanh;
  float eps_ = 1e-5f;
  Matrix wte_;                  // [V, C], as stored
  const float* wpe_ = nullptr;  // f32 [P, C]
  const float *lnf_g_ = nullptr, *lnf_b_ = nullptr;
  Linear lm_head_;  // [V, C] (nn.Linear layout; tied to wte)
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_gpt2(const std::string& dir, const HfConfig& config) {
  return std::make_unique<Gpt2>(dir, config);
}

}  // namespace attn::models
