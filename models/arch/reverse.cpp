#include "models/arch/reverse.h"

#include <algorithm>
#include <string>

#include "compute/error.h"
#include "models/arch/attention.h"

namespace attn::models {
namespace {

size_t floats(const std::vector<float>& v) {
  return v.size();
}

}  // namespace

size_t ReverseTrace::bytes() const {
  size_t n = floats(embeddings) + floats(embed_sum) + floats(final_in) + floats(head_pre) +
             floats(head_norm_in);
  for (const BlockTrace& b : blocks) {
    n += floats(b.x_attn) + floats(b.x_mlp) + floats(b.sum_attn) + floats(b.sum_mlp) +
         floats(b.pattern) + floats(b.att) + floats(b.pre) + floats(b.up) + b.problem.q.size() +
         b.problem.k.size() + b.problem.v.size();
  }
  return n * sizeof(float);
}

void check_embeddings(const ModelInput& in, int C) {
  require(in.embeddings.empty() || in.embeddings.size() == in.ids.size() * size_t(C),
          ErrorCode::InvalidArgument,
          "input embeddings hold " + std::to_string(in.embeddings.size()) + " values; " +
              std::to_string(in.ids.size()) + " tokens of hidden size " + std::to_string(C) +
              " need " + std::to_string(in.ids.size() * size_t(C)));
}

void token_embedding(const ModelInput& in, const Matrix& table, int t, int C, float* out) {
  if (!in.embeddings.empty()) {
    std::copy_n(in.embeddings.data() + size_t(t) * C, C, out);
    return;
  }
  matrix_row(table, size_t(in.ids[size_t(t)]), size_t(C), out);
}

double resolve_target(const ModelInfo& info, const ModelOutput& out, ReverseTarget& t) {
  require(!out.logits.empty() && out.n_logits > 0, ErrorCode::InvalidArgument,
          info.dir + " has no " + std::string(info.vision ? "classifier" : "language-model") +
              " head: there is no logit to attribute");
  const int classes = out.n_logits;
  if (info.vision) {
    t.position = 0;
  } else {
    const int N = out.n_tokens;
    if (t.position < 0) t.position = N - 1;
    require(t.position < N, ErrorCode::InvalidArgument,
            "target position " + std::to_string(t.position) + " is outside the input's " +
                std::to_string(N) + " tokens");
  }
  const float* row = out.logits_of(t.position);
  require(row != nullptr, ErrorCode::InvalidArgument,
          "the forward pass did not compute the logits of position " + std::to_string(t.position));
  const char* what = info.vision ? "class" : "token id";
  if (t.id < 0) t.id = int(std::max_element(row, row + classes) - row);
  require(t.id < classes, ErrorCode::InvalidArgument,
          std::string("target ") + what + " " + std::to_string(t.id) + " is outside [0, " +
              std::to_string(classes) + ")");
  require(t.foil < classes, ErrorCode::InvalidArgument,
          std::string("foil ") + what + " " + std::to_string(t.foil) + " is outside [0, " +
              std::to_string(classes) + ")");
  require(t.foil != t.id, ErrorCode::InvalidArgument,
          "the foil is the target itself: z = logit - logit would be 0");
  return double(row[t.id]) - (t.foil >= 0 ? double(row[t.foil]) : 0.0);
}

Reverse begin_reverse(const ModelInfo& info, ModelOutput out, const ReverseTarget& target,
                      const ReverseOptions& o) {
  Reverse r;
  ReverseTarget t = target;
  r.z = resolve_target(info, out, t);
  r.position = t.position;
  r.id = t.id;
  r.foil = t.foil;
  r.rule = o.rule;
  r.n_tokens = out.n_tokens;
  r.hidden = info.hidden;
  r.n_layers = info.n_layers;
  r.n_heads = info.n_heads;
  r.head_dim = info.head_dim;
  const size_t L = size_t(info.n_layers);
  if (o.keep_patterns) {
    r.pattern.resize(L);
    r.pattern_grad.resize(L);
  }
  if (o.keep_resid) r.resid_grad.resize(L);
  if (o.keep_heads) {
    r.head_out.resize(L);
    r.head_out_grad.resize(L);
  }
  r.output = std::move(out);
  r.seconds_forward = r.output.seconds;
  return r;
}

ForwardOptions traced(const ReverseOptions& o, ReverseTrace& tr, const ReverseTarget& t,
                      const ModelInput& in) {
  ForwardOptions f;
  const int n = int(in.ids.size());
  // An out-of-range position keeps every row, so that resolve_target reports it.
  if (o.target_logits_only && n > 0 && t.position < n) {
    f.logits_row = t.position < 0 ? n - 1 : t.position;
    // A known target needs its own logit (and the foil's), not the vocabulary's.
    if (o.target_ids_only && t.id >= 0) f.logits_ids = {t.id};
    if (o.target_ids_only && t.id >= 0 && t.foil >= 0) f.logits_ids.push_back(t.foil);
  }
  f.substitution = o.substitution;
  f.threads = o.threads;
  f.matmul = o.matmul;
  f.trace = &tr;
  return f;
}

Reverse end_reverse(Reverse r, std::vector<float> input, std::vector<float> grad,
                    std::vector<int> shape, const ReverseTrace& tr,
                    std::chrono::steady_clock::time_point t0) {
  r.input = std::move(input);
  r.input_grad = std::move(grad);
  r.input_shape = std::move(shape);
  r.trace_bytes = tr.bytes();
  r.seconds_backward = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void head_row_grad(const Linear& l, int id, int foil, float scale, float* g) {
  std::vector<float> w(size_t(l.in));
  matrix_row(l.w, size_t(id), size_t(l.in), w.data());
  for (int j = 0; j < l.in; ++j) g[j] += scale * w[size_t(j)];
  if (foil < 0) return;
  matrix_row(l.w, size_t(foil), size_t(l.in), w.data());
  for (int j = 0; j < l.in; ++j) g[j] -= scale * w[size_t(j)];
}

AttentionGrads attention_sublayer_backward(const BlockTrace& b, const Linear& o, const float* g_out,
                                           int layer, Rule rule, Reverse& r, int threads) {
  const Problem& p = b.problem;
  const int N = p.n_q, H = p.n_heads, d = p.d;
  std::vector<float> g_att(size_t(N) * H * d);
  linear_backward(g_out, N, o, g_att.data(), false, threads);
  AttentionGrads g;
  g.q.resize(p.q.size());
  g.k.resize(p.k.size());
  g.v.resize(p.v.size());
  float* d_pattern = nullptr;
  if (!r.pattern.empty()) {
    r.pattern[size_t(layer)] = b.pattern;
    r.pattern_grad[size_t(layer)].resize(b.pattern.size());
    d_pattern = r.pattern_grad[size_t(layer)].data();
  }
  attention_backward(p, b.pattern.data(), g_att.data(), g.q.data(), g.k.data(), g.v.data(),
                     d_pattern, rule, threads);
  if (!r.head_out.empty()) {
    auto& ho = r.head_out[size_t(layer)];
    auto& hg = r.head_out_grad[size_t(layer)];
    ho.resize(size_t(H) * N * d);
    hg.resize(ho.size());
    split_heads(b.att.data(), N, H * d, 0, H, d, ho.data());
    split_heads(g_att.data(), N, H * d, 0, H, d, hg.data());
  }
  return g;
}

void encoder_attention_backward(const BlockTrace& b, const Linear& q, const Linear& k,
                                const Linear& v, const Linear& o, const float* g_x, float* g_in,
                                bool accumulate, int layer, Rule rule, Reverse& r, int threads) {
  const Problem& p = b.problem;
  const int N = p.n_q, H = p.n_heads, d = p.d, C = H * d;
  const AttentionGrads ag = attention_sublayer_backward(b, o, g_x, layer, rule, r, threads);
  std::vector<float> tok(size_t(N) * C);
  merge_heads(ag.q.data(), N, H, d, tok.data(), C, 0);
  linear_backward(tok.data(), N, q, g_in, accumulate, threads);
  merge_heads(ag.k.data(), N, H, d, tok.data(), C, 0);
  linear_backward(tok.data(), N, k, g_in, true, threads);
  merge_heads(ag.v.data(), N, H, d, tok.data(), C, 0);
  linear_backward(tok.data(), N, v, g_in, true, threads);
}

void encoder_mlp_backward(const BlockTrace& b, const Linear& inter, Activation act,
                          const Linear& out, const float* g_x, float* g_in, bool accumulate,
                          Rule rule, int threads) {
  const int N = int(b.pre.size() / size_t(inter.out));
  std::vector<float> gm(b.pre.size());
  linear_backward(g_x, N, out, gm.data(), false, threads);
  activate_backward(act, b.pre.data(), gm.data(), gm.size(), rule, threads);
  linear_backward(gm.data(), N, inter, g_in, accumulate, threads);
}

}  // namespace attn::models
