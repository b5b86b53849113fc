#include "models/arch/attention.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"
#include "models/arch/intervention.h"
#include "models/arch/reverse.h"
#include "models/arch/substitution.h"

namespace attn::models {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

constexpr int kQueryBlock = 64;

}  // namespace

Problem layer_problem(int n_heads, int n_kv_heads, int n, int d, bool causal) {
  Problem p;
  p.n_heads = n_heads;
  p.n_kv_heads = n_kv_heads;
  p.n_q = p.n_k = n;
  p.d = d;
  p.causal = causal;
  p.scale = float(1.0 / std::sqrt(double(d)));
  p.q.assign(size_t(n_heads) * n * d, 0.0f);
  p.k.assign(size_t(n_kv_heads) * n * d, 0.0f);
  p.v.assign(size_t(n_kv_heads) * n * d, 0.0f);
  return p;
}

void split_heads(const float* src, int n, int src_stride, int col0, int heads, int d, float* dst,
                 int threads) {
  parallel_for(
      heads,
      [&](int h) {
        for (int t = 0; t < n; ++t) {
          std::copy_n(src + size_t(t) * src_stride + col0 + size_t(h) * d, d,
                      dst + (size_t(h) * n + t) * d);
        }
      },
      threads);
}

void dense_attention(const Problem& p, const std::vector<int>& heads, float* out, float* scores,
                     float* pattern, float* head_out, int threads) {
  const int n = p.n_q, nk = p.n_k, d = p.d, hd = p.n_heads * d;
  require(n <= nk, ErrorCode::InvalidArgument, "dense_attention: more queries than keys");
  // Causal queries are the last n of the nk positions: query i sees keys 0 .. off + i.
  const int off = nk - n;
  const float scale = p.effective_scale();
  const int blocks = (n + kQueryBlock - 1) / kQueryBlock;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Read here: the tasks run on pool threads, which do not share the caller's MatmulScope.
  const bool bf16 = current_matmul() == Matmul::Bf16;
  parallel_for(
      int(heads.size()) * blocks,
      [&](int task) {
        const int h = heads[size_t(task / blocks)];
        const int i0 = (task % blocks) * kQueryBlock, i1 = std::min(n, i0 + kQueryBlock);
        const int rows = i1 - i0;
        const int kend = p.causal ? off + i1 : nk;  // keys any row of the block may see
        Eigen::Map<const RowMat> Q(p.q_row(h, i0), rows, d);
        Eigen::Map<const RowMat> K(p.k_row(h, 0), kend, d);
        Eigen::Map<const RowMat> V(p.v_row(h, 0), kend, d);
        RowMat S(rows, kend);
        if (bf16) {
          product_bf16(Q.data(), d, K.data(), d, true, S.data(), kend, rows, kend, d);
          S *= scale;
        } else {
          S.noalias() = (Q * K.transpose()) * scale;
        }
        for (int r = 0; r < rows; ++r) {
          const int i = i0 + r;
          const int lim = p.causal ? off + i + 1 : kend;
          float* s = S.row(r).data();
          if (scores) {
            float* dst = scores + (size_t(h) * n + i) * nk;
            std::copy_n(s, lim, dst);
            std::fill(dst + lim, dst + nk, neg_inf);
          }
          Eigen::Map<Eigen::ArrayXf> row(s, lim);
          const float mx = row.maxCoeff();
          row = (row - mx).exp();
          row /= row.sum();
          std::fill(s + lim, s + kend, 0.0f);
          if (pattern) {
            float* dst = pattern + (size_t(h) * n + i) * nk;
            std::copy_n(s, kend, dst);
            std::fill(dst + kend, dst + nk, 0.0f);
          }
        }
        Strided O(out + size_t(i0) * hd + size_t(h) * d, rows, d, Eigen::OuterStride<>(hd));
        if (bf16)
          product_bf16(S.data(), kend, V.data(), d, false, O.data(), hd, rows, d, kend);
        else
          O.noalias() = S * V;
        if (head_out) {
          Eigen::Map<RowMat>(head_out + (size_t(h) * n + i0) * d, rows, d) = O;
        }
      },
      threads);
}

ForwardContext::ForwardContext(const ModelInfo& info, const ForwardOptions& opt, int n,
                               const std::vector<std::string>* labels)
    : info(info),
      opt(opt),
      threads(thread_count(opt.threads)),
      n(n),
      labels_(labels),
      matmul_(opt.matmul) {
  if (opt.capture) {
    opt.capture->selection().check(info.n_layers);
    opt.capture->layers.assign(size_t(info.n_layers), LayerCapture{});
    opt.capture->n_tokens = n;
    opt.capture->hidden = info.hidden;
  }
  if (const Substitution* s = opt.substitution) {
    s->check(info);
    if (s->variant->pattern()) seq_ = s->variant->pattern()->new_sequence_state();
  }
  if (opt.intervention) opt.intervention->check(info, n);
}

bool ForwardContext::wants(int layer, const char* what) const {
  return opt.capture && opt.capture->selection().wants(layer, what);
}

bool ForwardContext::needs_problem(int layer) const {
  for (const char* what : {"attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern", "attn.out"})
    if (wants(layer, what)) return true;
  if (opt.intervention && opt.intervention->edits_heads(layer)) return true;
  return opt.substitution && opt.substitution->applies(layer);
}

void ForwardContext::end_block(int layer, float* x) {
  if (opt.intervention) opt.intervention->apply_resid(layer, x, n, info.hidden);
  if (!wants(layer, "resid")) return;
  auto& r = opt.capture->layers[size_t(layer)].resid;
  r.assign(x, x + size_t(n) * info.hidden);
}

void ForwardContext::attention(int layer, Problem& p, float* out, float* probs) {
  const int H = p.n_heads;
  LayerCapture* cap = opt.capture ? &opt.capture->layers[size_t(layer)] : nullptr;
  if (labels_ && labels_->size() == size_t(p.n_k)) p.labels = *labels_;
  if (cap) {
    cap->n_heads = H;
    cap->d = p.d;
    if (wants(layer, "attn.q") || wants(layer, "attn.k") || wants(layer, "attn.v")) {
      cap->problem = p;
      cap->has_problem = true;
    }
    const size_t nn = size_t(H) * n * size_t(p.n_k);
    // Not zeroed: the kernels below write every element, in parallel (first touch).
    if (wants(layer, "attn.scores")) cap->scores.resize(nn);
    if (wants(layer, "attn.pattern")) cap->pattern.resize(nn);
    if (wants(layer, "attn.out")) cap->out.resize(size_t(H) * n * p.d);
  }
  float* scores = cap && !cap->scores.empty() ? cap->scores.data() : nullptr;
  float* pattern = cap && !cap->pattern.empty() ? cap->pattern.data() : probs;
  // A captured pattern is also what `probs` asked for: copied on every way out.
  struct CopyOut {
    const float* from;
    float* to;
    size_t n;
    ~CopyOut() {
      if (from && to && from != to) std::copy_n(from, n, to);
    }
  } copy_out{pattern, probs, size_t(H) * n * size_t(p.n_k)};
  float* head_out = cap && !cap->out.empty() ? cap->out.data() : nullptr;

  const Substitution* sub = opt.substitution;
  std::vector<int> var_heads;
  if (sub && sub->applies(layer)) var_heads = sub->heads_of(H);
  std::vector<int> dense_heads;
  for (int h = 0; h < H; ++h) {
    const bool var = std::binary_search(var_heads.begin(), var_heads.end(), h);
    // Scores are Q.K scaled, before any variant: the dense kernel provides them for every head.
    if (!var || scores) dense_heads.push_back(h);
  }
  if (!dense_heads.empty())
    dense_attention(p, dense_heads, out, scores, pattern, head_out, threads);
  // Interventions edit the heads' outputs last, whichever kernel computed them.
  struct Intervene {
    const Intervention* iv;
    const Problem& p;
    int layer, n, H, d;
    float *out, *head_out, *pattern;
    ~Intervene() {
      if (!iv) return;
      iv->apply_patterns(layer, p, out, head_out, pattern);
      iv->apply_heads(layer, out, n, H, d, head_out);
    }
  } intervene{opt.intervention, p, layer, n, H, p.d, out, head_out, pattern};
  if (var_heads.empty()) return;

  const bool all = int(var_heads.size()) == H;
  Problem selected;
  if (!all) selected = select_heads(p, var_heads);
  const Problem& vp = all ? p : selected;
  RunOptions ro = sub->run;
  if (ro.threads == 0) ro.threads = threads;
  Result r = run(*sub->variant, vp, *sub->backend, seq_.get(), ro);
  const int d = p.d, hd = H * d;
  for (size_t i = 0; i < var_heads.size(); ++i) {
    const int h = var_heads[i];
    for (int t = 0; t < n; ++t) {
      const float* src = r.o_row(int(i), t);
      std::copy_n(src, d, out + size_t(t) * hd + size_t(h) * d);
      if (head_out) std::copy_n(src, d, head_out + (size_t(h) * n + t) * d);
    }
  }
  if (pattern) {
    // What the substituted heads actually attended to.
    parallel_for(
        int(var_heads.size()),
        [&](int i) {
          std::vector<double> block;
          probability_block(*sub->variant, vp, r, i, 0, n, 0, p.n_k, block);
          float* dst = pattern + size_t(var_heads[size_t(i)]) * n * size_t(p.n_k);
          for (size_t e = 0; e < size_t(n) * size_t(p.n_k); ++e) dst[e] = float(block[e]);
        },
        threads);
  }
  substituted.push_back({layer, var_heads, r.stats, std::nullopt});
  if (sub->keep_results && all) substituted.back().result = std::move(r);
}

EncoderScratch::EncoderScratch(int n, int hidden, int intermediate)
    : q(size_t(n) * hidden),
      k(q.size()),
      v(q.size()),
      att(q.size()),
      tmp(q.size()),
      mlp(size_t(n) * intermediate) {}

void encoder_attention(ForwardContext& ctx, int layer, const float* in, const Linear& q,
                       const Linear& k, const Linear& v, const Linear& o, int H, int d,
                       EncoderScratch& s, float* x, BlockTrace* trace) {
  const int N = ctx.n, C = q.out, th = ctx.threads;  // C: the hidden size
  linear(in, N, q, s.q.data(), th);
  linear(in, N, k, s.k.data(), th);
  linear(in, N, v, s.v.data(), th);
  Problem p = layer_problem(H, H, N, d, false);
  split_heads(s.q.data(), N, C, 0, H, d, p.q.data(), th);
  split_heads(s.k.data(), N, C, 0, H, d, p.k.data(), th);
  split_heads(s.v.data(), N, C, 0, H, d, p.v.data(), th);
  if (trace) trace->pattern.resize(size_t(H) * N * N);
  ctx.attention(layer, p, s.att.data(), trace ? trace->pattern.data() : nullptr);
  if (trace) {
    trace->problem = std::move(p);
    trace->att = s.att;
  }
  linear(s.att.data(), N, o, s.tmp.data(), th);
  add_inplace(x, s.tmp.data(), s.tmp.size());
}

void encoder_mlp(const float* in, int n, const Linear& inter, Activation act, const Linear& out,
                 EncoderScratch& s, float* x, int threads, BlockTrace* trace) {
  linear(in, n, inter, s.mlp.data(), threads);
  if (trace) trace->pre = s.mlp;
  activate(act, s.mlp.data(), s.mlp.size(), threads);
  linear(s.mlp.data(), n, out, s.tmp.data(), threads);
  add_inplace(x, s.tmp.data(), s.tmp.size());
}

}  // namespace attn::models
