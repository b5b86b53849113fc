// BERT family (bert-base-uncased, MiniLM, ...): word + position + token-type embeddings with
// LayerNorm, post-LN encoder blocks (bidirectional attention, exact GELU), last hidden state, and
// the masked-LM head (transform + LayerNorm + decoder tied to the embeddings) when present.
#include <chrono>

#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/architectures.h"
#include "models/arch/attention.h"
#include "models/arch/attention_parts.h"
#include "models/arch/layers.h"
#include "models/arch/reverse.h"
#include "models/arch/weights.h"

namespace attn::models {
namespace {

class Bert : public Model {
 public:
  Bert(const std::string& dir, const HfConfig& c) : ws_(dir) {
    config_ = c;
    fill_text_info(info_, dir, c, Family::Bert);
    ws_.set_prefixes({"bert."});
    const int C = info_.hidden, V = config_int(c, c.vocab_size, "vocab_size");
    const int P = info_.max_tokens, T = config_int(c, c.type_vocab_size, "type_vocab_size");
    require(info_.n_heads * info_.head_dim == C, ErrorCode::Format,
            c.source + ": BERT needs hidden_size = num_attention_heads * head_dim");
    inter_ = config_int(c, c.intermediate_size, "intermediate_size");
    act_ = activation_from_name(c.hidden_act, c.source);
    eps_ = float(c.norm_eps);
    vocab_rows_ = V;
    types_ = T;
    word_ =
        ws_.get_matrix("embeddings.word_embeddings.weight", {V, C}, "[vocab_size, hidden_size]");
    pos_ = ws_.get("embeddings.position_embeddings.weight", {P, C},
                   "[max_position_embeddings, hidden_size]");
    type_ = T > 0 ? ws_.get("embeddings.token_type_embeddings.weight", {T, C},
                            "[type_vocab_size, hidden_size]")
                  : nullptr;
    emb_ln_g_ = ws_.get("embeddings.LayerNorm.weight", {C});
    emb_ln_b_ = ws_.get("embeddings.LayerNorm.bias", {C});
    for (int l = 0; l < info_.n_layers; ++l) {
      const std::string b = "encoder.layer." + std::to_string(l) + ".";
      Layer L;
      L.q = load_linear(ws_, b + "attention.self.query", C, C, true);
      L.k = load_linear(ws_, b + "attention.self.key", C, C, true);
      L.v = load_linear(ws_, b + "attention.self.value", C, C, true);
      L.o = load_linear(ws_, b + "attention.output.dense", C, C, true);
      L.ln1_g = ws_.get(b + "attention.output.LayerNorm.weight", {C});
      L.ln1_b = ws_.get(b + "attention.output.LayerNorm.bias", {C});
      L.inter = load_linear(ws_, b + "intermediate.dense", C, inter_, true);
      L.out = load_linear(ws_, b + "output.dense", inter_, C, true);
      L.ln2_g = ws_.get(b + "output.LayerNorm.weight", {C});
      L.ln2_b = ws_.get(b + "output.LayerNorm.bias", {C});
      layers_.push_back(L);
    }
    // Masked-LM head (BertForMaskedLM / BertForPreTraining), when the checkpoint has one.
    if (ws_.has("cls.predictions.transform.dense.weight")) {
      has_mlm_ = true;
      mlm_dense_ = load_linear(ws_, "cls.predictions.transform.dense", C, C, true);
      mlm_ln_g_ = ws_.get("cls.predictions.transform.LayerNorm.weight", {C});
      mlm_ln_b_ = ws_.get("cls.predictions.transform.LayerNorm.bias", {C});
      decoder_.in = C;
      decoder_.out = V;
      decoder_.w = ws_.get_matrix_optional("cls.predictions.decoder.weight", {V, C});
      if (!decoder_.w) decoder_.w = word_;  // tied
      decoder_.b = ws_.get_optional("cls.predictions.bias", {V});
      if (!decoder_.b) decoder_.b = ws_.get_optional("cls.predictions.decoder.bias", {V});
      info_.vocab = V;
    }
    tokenizer_ = load_tokenizer_if_present(dir);
    ws_.describe(info_);
  }

  ModelOutput forward(const ModelInput& in, const ForwardOptions& opt) const override {
    const auto t0 = std::chrono::steady_clock::now();
    check_token_ids(info_, in, vocab_rows_);
    check_embeddings(in, info_.hidden);
    const int N = int(in.ids.size()), C = info_.hidden, H = info_.n_heads, d = info_.head_dim;
    for (size_t i = 0; i < in.token_types.size(); ++i) {
      require(in.token_types[i] >= 0 && in.token_types[i] < std::max(types_, 1),
              ErrorCode::InvalidArgument,
              "token type " + std::to_string(in.token_types[i]) + " at position " +
                  std::to_string(i) + " is outside [0, " + std::to_string(types_) + ")");
    }
    ForwardContext ctx(info_, opt, N, in.labels.empty() ? nullptr : &in.labels);
    const int th = ctx.threads;
    std::vector<float> x(size_t(N) * C);
    EncoderScratch s(N, C, inter_);
    ReverseTrace* tr = opt.trace;
    if (tr) {
      tr->blocks.resize(size_t(info_.n_layers));
      tr->embeddings.resize(x.size());
    }
    for (int t = 0; t < N; ++t) {
      float* w = x.data() + size_t(t) * C;
      token_embedding(in, word_, t, C, w);
      if (tr) std::copy_n(w, C, tr->embeddings.data() + size_t(t) * C);
      const float* p = pos_ + size_t(t) * C;
      const int tt = in.token_types.empty() ? 0 : in.token_types[size_t(t)];
      for (int j = 0; j < C; ++j) w[j] = w[j] + p[j] + (type_ ? type_[size_t(tt) * C + j] : 0.0f);
    }
    if (tr) tr->embed_sum = x;
    layer_norm(x.data(), N, C, emb_ln_g_, emb_ln_b_, eps_, x.data(), th);
    for (int l = 0; l < info_.n_layers; ++l) {
      const Layer& L = layers_[size_t(l)];
      BlockTrace* b = tr ? &tr->blocks[size_t(l)] : nullptr;
      if (b) b->x_attn = x;
      // Post-LN: each sublayer reads the stream itself, then the sum is normed.
      encoder_attention(ctx, l, x.data(), L.q, L.k, L.v, L.o, H, d, s, x.data(), b);
      if (b) b->sum_attn = x;
      layer_norm(x.data(), N, C, L.ln1_g, L.ln1_b, eps_, x.data(), th);
      if (b) b->x_mlp = x;
      encoder_mlp(x.data(), N, L.inter, act_, L.out, s, x.data(), th, b);
      if (b) b->sum_mlp = x;
      layer_norm(x.data(), N, C, L.ln2_g, L.ln2_b, eps_, x.data(), th);
      ctx.end_block(l, x.data());
    }
    ModelOutput out;
    out.n_tokens = N;
    out.hidden = C;
    out.hidden_state = x;
    if (has_mlm_) {
      linear(x.data(), N, mlm_dense_, s.tmp.data(), th);
      if (tr) tr->head_pre = s.tmp;
      activate(act_, s.tmp.data(), s.tmp.size(), th);
      if (tr) tr->head_norm_in = s.tmp;
      layer_norm(s.tmp.data(), N, C, mlm_ln_g_, mlm_ln_b_, eps_, s.tmp.data(), th);
      out.n_logits = decoder_.out;
      out.logits.resize(size_t(N) * decoder_.out);
      linear(s.tmp.data(), N, decoder_, out.logits.data(), th);
    }
    out.substituted = std::move(ctx.substituted);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  }

  Reverse reverse(const ModelInput& in, const ReverseTarget& target,
                  const ReverseOptions& o) const override {
    ReverseTrace tr;
    const MatmulScope matmul(o.matmul);  // the backward's products too
    Reverse r = begin_reverse(info_, forward(in, traced(o, tr, target, in)), target, o);
    const auto t0 = std::chrono::steady_clock::now();
    const int N = r.n_tokens, C = info_.hidden, th = thread_count(o.threads);
    std::vector<float> g(size_t(N) * C, 0.0f), gt(g.size(), 0.0f), ga(g.size());
    // The MLM head: logits = decoder(LayerNorm(act(dense(x)))).
    head_row_grad(decoder_, r.id, r.foil, 1.0f, gt.data() + size_t(r.position) * C);
    layer_norm_backward(tr.head_norm_in.data(), N, C, mlm_ln_g_, eps_, gt.data(), ga.data(), o.rule,
                        false, th);
    activate_backward(act_, tr.head_pre.data(), ga.data(), ga.size(), o.rule, th);
    linear_backward(ga.data(), N, mlm_dense_, g.data(), false, th);
    for (int l = info_.n_layers - 1; l >= 0; --l) {
      const Layer& L = layers_[size_t(l)];
      const BlockTrace& b = tr.blocks[size_t(l)];
      if (!r.resid_grad.empty()) r.resid_grad[size_t(l)] = g;
      // x = LN2(x1 + mlp(x1)), x1 = LN1(x0 + attention(x0)).
      layer_norm_backward(b.sum_mlp.data(), N, C, L.ln2_g, eps_, g.data(), gt.data(), o.rule, false,
                          th);
      ga = gt;
      encoder_mlp_backward(b, L.inter, act_, L.out, gt.data(), ga.data(), true, o.rule, th);
      layer_norm_backward(b.sum_attn.data(), N, C, L.ln1_g, eps_, ga.data(), gt.data(), o.rule,
                          false, th);
      g = gt;
      encoder_attention_backward(b, L.q, L.k, L.v, L.o, gt.data(), g.data(), true, l, o.rule, r,
                                 th);
    }
    layer_norm_backward(tr.embed_sum.data(), N, C, emb_ln_g_, eps_, g.data(), gt.data(), o.rule,
                        false, th);
    return end_reverse(std::move(r), std::move(tr.embeddings), std::move(gt), {N, C}, tr, t0);
  }

 private:
  // Post-LN: the sublayer reads the stream itself (its norm comes after the sum).
  AttentionParts attention_parts(const ReverseTrace& trace, int layer) const override {
    require(layer >= 0 && layer < info_.n_layers && size_t(layer) < trace.blocks.size() &&
                !trace.blocks[size_t(layer)].x_attn.empty(),
            ErrorCode::InvalidArgument,
            "layer " + std::to_string(layer) + " is not in the traced forward pass");
    const std::vector<float>& x = trace.blocks[size_t(layer)].x_attn;
    const Layer& L = layers_[size_t(layer)];
    AttentionParts a;
    a.q = L.q;
    a.k = L.k;
    a.v = L.v;
    a.o = L.o;
    a.x = x;
    a.norm = "none (post-LN: the previous block's output)";
    return a;
  }

  struct Layer {
    Linear q, k, v, o, inter, out;               // nn.Linear [out, in]
    const float *ln1_g, *ln1_b, *ln2_g, *ln2_b;  // f32 [C]
  };
  WeightStore ws_;
  int inter_ = 0, vocab_rows_ = 0, types_ = 0;
  Activation act_ = Activation::GeluErf;
  float eps_ = 1e-12f;
  Matrix word_;                  // [V, C], as stored
  const float* pos_ = nullptr;   // f32 [P, C]
  const float* type_ = nullptr;  // f32 [T, C]
  const float *emb_ln_g_ = nullptr, *emb_ln_b_ = nullptr;
  std::vector<Layer> layers_;
  bool has_mlm_ = false;
  Linear mlm_dense_;
  const float *mlm_ln_g_ = nullptr, *mlm_ln_b_ = nullptr;
  Linear decoder_;  // [V, C] + bias [V]
};

}  // namespace

std::unique_ptr<Model> make_bert(const std::string& dir, const HfConfig& config) {
  return std::make_unique<Bert>(dir, config);
}

}  // namespace attn::models
