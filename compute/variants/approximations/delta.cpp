// Delta correction of sparse attention: the variant's pattern runs sparsely as usual; queries
// i = 0, s, 2s, ... (s = stride) also run dense; every query j then gets
//   out_j = sparse_j + (dense_i - sparse_i),   i = s * floor(j / s),
// i.e. each query borrows the correction its anchor query measured (the difference between
// dense and sparse attention varies slowly along the sequence). Stride 1 is dense attention.
// Kept entries: the pattern's, plus every visible key of the anchor queries (their dense rows).
// The implied matrix follows the same rule row by row: P_sparse[j] + P_dense[i] - P_sparse[i]
// (rows still sum to one; entries may be negative).
// (Willette, Lee, Hwang 2025: on top of sliding window + sinks, "recovering 88% of quadratic
// attention accuracy" on 131K-token RULER at ~98.5% sparsity.)
#include <algorithm>
#include <chrono>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

// Result `r` restricted to head h (the layout and row statistics; outputs are not kept).
Result head_slice(const Result& r, int h) {
  Result s;
  s.n_heads = 1;
  s.n_q = r.n_q;
  s.d = r.d;
  s.row_stat.assign(r.row_stat.begin() + ptrdiff_t(size_t(h) * r.n_q),
                    r.row_stat.begin() + ptrdiff_t(size_t(h + 1) * r.n_q));
  s.layout = head_layout(r.layout, h);
  return s;
}

struct DeltaState final : ApproxState {
  Result sparse;                           // the pattern's run (layout and row stats; no output)
  Result dense;                            // the anchors' dense run (row stats)
  std::shared_ptr<const Problem> anchors;  // the anchor queries as a problem [H, n_anchor, d]

  std::shared_ptr<const ApproxState> head(int h) const override {
    auto s = std::make_shared<DeltaState>();
    s->sparse = head_slice(sparse, h);
    s->dense = head_slice(dense, h);
    Problem one = *anchors;
    const size_t qs = size_t(one.n_q) * one.d, ks = size_t(one.n_k) * one.d;
    one.q.assign(anchors->q.begin() + ptrdiff_t(h * qs),
                 anchors->q.begin() + ptrdiff_t((h + 1) * qs));
    const int kv = anchors->kv_head(h);
    one.k.assign(anchors->k.begin() + ptrdiff_t(kv * ks),
                 anchors->k.begin() + ptrdiff_t((kv + 1) * ks));
    one.v.assign(anchors->v.begin() + ptrdiff_t(kv * ks),
                 anchors->v.begin() + ptrdiff_t((kv + 1) * ks));
    one.n_heads = one.n_kv_heads = 1;
    s->anchors = std::make_shared<Problem>(std::move(one));
    return s;
  }
};

class Delta final : public Approximation {
 public:
  explicit Delta(const Params& params) : stride_(int(params.at("stride"))) {}
  VariantInfo info() const override { return kDeltaApprox.info(); }
  Kind kind() const override { return Kind::Wrap; }

  Result run(const Variant& v, const Problem& p, Backend& backend, ApproxPath path,
             const RunOptions& opt) const override {
    (void)path;
    Result r = run_exact(v, p, backend, opt);
    auto anchors = std::make_shared<Problem>(anchor_problem(p));
    Result dense = run_exact(dense_of(v), *anchors, backend, opt);
    const auto t0 = std::chrono::steady_clock::now();
    // out_j += dense_i - sparse_i, anchors first read (row i's sparse output is changed last).
    const int d = p.d;
    std::vector<float> delta(size_t(p.n_heads) * anchors->n_q * d);
    for (int h = 0; h < p.n_heads; ++h)
      for (int a = 0; a < anchors->n_q; ++a)
        for (int c = 0; c < d; ++c)
          delta[(size_t(h) * anchors->n_q + a) * d + c] =
              dense.o_row(h, a)[c] - r.o_row(h, a * stride_)[c];
    for (int h = 0; h < p.n_heads; ++h)
      for (int j = 0; j < p.n_q; ++j) {
        float* o = r.o.data() + (size_t(h) * p.n_q + j) * d;
        const float* dl = delta.data() + (size_t(h) * anchors->n_q + j / stride_) * d;
        for (int c = 0; c < d; ++c) o[c] += dl[c];
      }
    auto state = std::make_shared<DeltaState>();
    state->sparse.n_heads = r.n_heads;
    state->sparse.n_q = r.n_q;
    state->sparse.d = r.d;
    state->sparse.row_stat = r.row_stat;
    state->sparse.layout = r.layout;
    state->dense.n_heads = dense.n_heads;
    state->dense.n_q = dense.n_q;
    state->dense.d = dense.d;
    state->dense.row_stat = std::move(dense.row_stat);
    state->dense.layout = std::move(dense.layout);
    state->anchors = anchors;
    r.layout = kept_layout(p, r.layout);
    r.stats.counted.flops += dense.stats.counted.flops + 2.0 * double(p.n_heads) * p.n_q * d;
    r.stats.counted.bytes += dense.stats.counted.bytes;
    r.stats.kernel_seconds +=
        dense.stats.kernel_seconds +
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.approx = state;
    return r;
  }

  void implied_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                     int k0, int k1, std::vector<double>& out) const override {
    const auto* state = dynamic_cast<const DeltaState*>(r.approx.get());
    require(state != nullptr, ErrorCode::InvalidArgument,
            "delta: the result carries no sparse and dense runs (was it run by this variant?)");
    const Variant exact = v.exact_part(), dense = dense_of(v);
    probability_block(exact, p, state->sparse, h, i0, i1, k0, k1, out);
    const int w = k1 - k0;
    std::vector<double> ps, pd;
    for (int a = i0 / stride_; a * stride_ < i1; ++a) {
      const int i = a * stride_;
      probability_block(exact, p, state->sparse, h, i, i + 1, k0, k1, ps);
      probability_block(dense, *state->anchors, state->dense, h, a, a + 1, k0, k1, pd);
      for (int j = std::max(i, i0); j < std::min(i + stride_, i1); ++j)
        for (int c = 0; c < w; ++c) out[size_t(j - i0) * w + c] += pd[size_t(c)] - ps[size_t(c)];
    }
  }

  Cost predict(const Variant& v, const Problem& p, double density) const override {
    (void)density;
    Cost c = v.exact_part().predict(p, -1);
    double anchor_entries = 0;
    for (int i = 0; i < p.n_q; i += stride_)
      anchor_entries += p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
    c.flops += p.n_heads * (4.0 * p.d * anchor_entries + 2.0 * p.n_q * p.d);
    c.bytes += 4.0 * p.n_heads * (2.0 * p.d * anchor_entries / 64.0 + 2.0 * p.n_q * p.d);
    return c;
  }

 private:
  // The same modifiers and normaliser over every visible key.
  static Variant dense_of(const Variant& v) {
    return Variant("dense", nullptr, v.mods(), v.normaliser());
  }

  // Queries 0, s, 2s, ... at their own positions, against every key.
  Problem anchor_problem(const Problem& p) const {
    Problem a;
    a.n_heads = p.n_heads;
    a.n_kv_heads = p.n_kv_heads;
    a.n_q = (p.n_q + stride_ - 1) / stride_;
    a.n_k = p.n_k;
    a.d = p.d;
    a.causal = p.causal;
    a.scale = p.scale;
    a.k = p.k;
    a.v = p.v;
    a.k_pos.resize(size_t(p.n_k));
    for (int j = 0; j < p.n_k; ++j) a.k_pos[size_t(j)] = p.kpos(j);
    a.q.resize(size_t(p.n_heads) * a.n_q * p.d);
    a.q_pos.resize(size_t(a.n_q));
    for (int x = 0; x < a.n_q; ++x) a.q_pos[size_t(x)] = p.qpos(x * stride_);
    for (int h = 0; h < p.n_heads; ++h)
      for (int x = 0; x < a.n_q; ++x)
        std::copy_n(p.q_row(h, x * stride_), p.d, a.q.data() + (size_t(h) * a.n_q + x) * p.d);
    return a;
  }

  // The pattern's kept set with every visible key of the anchor queries added (per head).
  Layout kept_layout(const Problem& p, const Layout& sparse) const {
    if (sparse.kind == Layout::Kind::Dense || stride_ == 1) return Layout{};
    Layout out;
    out.kind = Layout::Kind::Indices;
    out.indices.resize(size_t(p.n_heads));
    parallel_for(p.n_heads, [&](int h) {
      IndexLayout x = to_index_layout(sparse, p, h);
      IndexLayout& y = out.indices[size_t(h)];
      y.row_ptr.assign(size_t(p.n_q) + 1, 0);
      for (int i = 0; i < p.n_q; ++i) {
        if (i % stride_ == 0) {
          for (int j = 0; j < p.n_k; ++j)
            if (p.visible(i, j)) y.col.push_back(j);
        } else {
          y.col.insert(y.col.end(), x.col.begin() + x.row_ptr[size_t(i)],
                       x.col.begin() + x.row_ptr[size_t(i) + 1]);
        }
        y.row_ptr[size_t(i) + 1] = int64_t(y.col.size());
      }
    });
    return out;
  }

  int stride_;
};

VariantInfo delta_info() {
  return {"delta",
          "Delta correction",
          "correction",
          "Willette, Lee, Hwang 2025, Delta Attention: Fast and Accurate Sparse Attention "
          "Inference by Delta Correction",
          "Queries i = 0, s, 2s, ... also run dense; each query adds its anchor's dense - sparse "
          "output. Written after a sparse pattern.",
          {int_param("stride", 1, 1000000, 16, "one dense query every `stride` queries")}};
}

}  // namespace

const ApproximationFactory kDeltaApprox = {delta_info, make_from_params<Approximation, Delta>};

}  // namespace attn
