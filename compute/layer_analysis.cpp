#include "compute/layer_analysis.h"

#include <Eigen/Dense>
#include <algorithm>

#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"
#include "compute/registry.h"

namespace attn {

Problem select_heads(const Problem& p, const std::vector<int>& heads) {
  Problem s;
  s.n_heads = s.n_kv_heads = int(heads.size());
  s.n_q = p.n_q;
  s.n_k = p.n_k;
  s.d = p.d;
  s.causal = p.causal;
  s.scale = p.scale;
  s.q_pos = p.q_pos;
  s.k_pos = p.k_pos;
  s.labels = p.labels;
  const size_t qs = size_t(p.n_q) * p.d, ks = size_t(p.n_k) * p.d;
  s.q.resize(heads.size() * qs);
  s.k.resize(heads.size() * ks);
  s.v.resize(heads.size() * ks);
  for (size_t i = 0; i < heads.size(); ++i) {
    const int h = heads[i];
    std::copy_n(p.q.data() + size_t(h) * qs, qs, s.q.data() + i * qs);
    std::copy_n(p.k.data() + size_t(p.kv_head(h)) * ks, ks, s.k.data() + i * ks);
    std::copy_n(p.v.data() + size_t(p.kv_head(h)) * ks, ks, s.v.data() + i * ks);
  }
  return s;
}

Problem head_problem(const Problem& p, int h) {
  return select_heads(p, {h});
}

Result head_result(const Result& r, const Problem& p, int h) {
  Result s;
  s.n_heads = 1;
  s.n_q = r.n_q;
  s.d = r.d;
  const size_t os = size_t(r.n_q) * r.d;
  s.o.assign(r.o.begin() + ptrdiff_t(size_t(h) * os), r.o.begin() + ptrdiff_t(size_t(h + 1) * os));
  if (!r.row_stat.empty()) {
    s.row_stat.assign(r.row_stat.begin() + ptrdiff_t(size_t(h) * r.n_q),
                      r.row_stat.begin() + ptrdiff_t(size_t(h + 1) * r.n_q));
  }
  s.layout = head_layout(r.layout, h);
  s.stats = r.stats;
  if (r.approx) s.approx = r.approx->head(h);
  // Counting reads positions only: p itself stands for its one-head slice (no copy of Q, K, V).
  const int64_t kept = layout_kept_entries(s.layout, p, 0);
  const int64_t visible = visible_entries(p);
  s.stats.kept_entries = kept;
  s.stats.density = visible > 0 ? double(kept) / double(visible) : 0.0;
  return s;
}

std::vector<Result> dense_layers(const std::vector<const Problem*>& problems, Backend& backend,
                                 const RunOptions& opt) {
  const Variant dense = make_variant("dense");
  std::vector<Result> out;
  out.reserve(problems.size());
  for (const Problem* p : problems) out.push_back(run(dense, *p, backend, opt));
  return out;
}

std::vector<LayerAnalysis> analyze_layers(const Variant& v,
                                          const std::vector<const Problem*>& problems,
                                          const std::vector<int>& layers,
                                          const std::vector<Result>& dense, Backend& backend,
                                          const RunOptions& opt) {
  require(problems.size() == dense.size() && problems.size() == layers.size(),
          ErrorCode::InvalidArgument, "analyze_layers: problems, layers and dense results differ");
  std::unique_ptr<SequenceState> seq = v.pattern() ? v.pattern()->new_sequence_state() : nullptr;
  std::vector<LayerAnalysis> out;
  for (size_t l = 0; l < problems.size(); ++l) {
    const Problem& p = *problems[l];
    const Result r = run(v, p, backend, seq.get(), opt);
    LayerAnalysis a;
    a.layer = layers[l];
    a.all = compare(v, p, r, dense[l]);
    a.heads.resize(size_t(p.n_heads));
    parallel_for(
        p.n_heads,
        [&](int h) {
          const Problem ph = head_problem(p, h);
          a.heads[size_t(h)] = compare(v, ph, head_result(r, p, h), head_result(dense[l], p, h));
        },
        opt.threads);
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<double> attention_rollout(const Variant& v, const std::vector<Problem>& layers,
                                      const std::vector<Result>& results, int from,
                                      int max_tokens) {
  require(layers.size() == results.size() && !layers.empty(), ErrorCode::InvalidArgument,
          "attention_rollout: one result per layer is needed");
  const int N = layers[0].n_k, H = layers[0].n_heads;
  require(layers[0].n_q == N && from >= 0 && from < N, ErrorCode::InvalidArgument,
          "attention_rollout: square problems and a row in range are needed");
  if (N > max_tokens) return {};
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Mat roll = Mat::Identity(N, N), A(N, N);
  std::vector<double> blk;
  for (size_t l = 0; l < layers.size(); ++l) {
    A = 0.5 * Mat::Identity(N, N);
    for (int h = 0; h < H; ++h) {
      probability_block(v, layers[l], results[l], h, 0, N, 0, N, blk);
      A += (0.5 / H) * Eigen::Map<const Mat>(blk.data(), N, N);
    }
    roll = A * roll;
  }
  return std::vector<double>(roll.row(from).data(), roll.row(from).data() + N);
}

}  // namespace attn
