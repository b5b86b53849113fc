#include "compute/variants/selectors/sketch_walk.h"

#include <algorithm>
#include <cmath>

#include "compute/variants/patterns.h"
#include "compute/variants/selectors/hadamard_sketch.h"
#include "compute/variants/selectors/selector_util.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

class SketchWalkPattern final : public Pattern {
 public:
  SketchWalkPattern(int block, double density, int sketch_dim, uint64_t seed)
      : block_(block), density_(density), sketch_dim_(sketch_dim), seed_(seed) {}
  VariantInfo info() const override { return kSketchWalkPattern.info(); }
  bool dynamic() const override { return true; }
  std::unique_ptr<SequenceState> new_sequence_state() const override {
    return std::make_unique<WalkState>();
  }

  Layout select(const Problem& p, SelectStats* stats, SequenceState* seq) const override {
    double flops = 0;
    detail::BlockGrid g(p, block_);
    HadamardSketch sk(p.d, sketch_dim_, seed_);
    std::vector<std::vector<double>> sk_keys;
    for (const auto& k : detail::pooled_keys(p, block_, &flops))
      sk_keys.push_back(sk.apply(k.data(), g.n_kb, &flops));
    auto log_count = detail::log_visible_counts(p, g);
    double scale = p.effective_scale();
    int m = sk.dim();

    // The walk continues only over square block attention of an unchanged shape.
    auto* walk = dynamic_cast<WalkState*>(seq);
    bool square = p.n_q == p.n_k && g.n_qb == g.n_kb;
    bool continues =
        walk && square && walk->layers > 0 && walk->n_b == g.n_qb && walk->n_heads == p.n_heads;
    if (walk && !continues) *walk = WalkState{};

    Layout l;
    l.kind = Layout::Kind::Blocks;
    std::vector<std::vector<int32_t>> rows(size_t(g.n_qb));
    std::vector<std::vector<double>> new_w(size_t(p.n_heads));
    for (int h = 0; h < p.n_heads; ++h) {
      auto pq = detail::pooled_queries(p, h, block_, &flops);
      std::vector<double> sq = sk.apply(pq.data(), g.n_qb, &flops);
      const std::vector<double>& skk = sk_keys[size_t(p.kv_head(h))];
      // Block attention estimate A [n_qb, n_kb] (zero outside the visible blocks).
      std::vector<double> a(size_t(g.n_qb) * g.n_kb, 0.0), row;
      for (int r = 0; r < g.n_qb; ++r) {
        row.resize(size_t(g.n_vis[r]));
        for (int c = 0; c < g.n_vis[r]; ++c)
          row[c] = scale * detail::dot(sq.data() + size_t(r) * m, skk.data() + size_t(c) * m, m) +
                   log_count[r][c];
        detail::softmax_inplace(row);
        std::copy(row.begin(), row.end(), a.begin() + std::ptrdiff_t(size_t(r) * g.n_kb));
        flops += (2.0 * m + 5.0) * g.n_vis[r];
      }
      // Walk W = rownorm(A W_prev), or A itself at the start.
      std::vector<double> w = continues ? walk_step(a, walk->w[size_t(h)], g, &flops) : a;
      for (int r = 0; r < g.n_qb; ++r) rows[r] = choose(a, w, g, r);
      l.blocks.push_back(detail::block_layout_from_rows(rows, block_, p));
      new_w[size_t(h)] = std::move(w);
    }
    if (walk && square) {
      walk->n_heads = p.n_heads;
      walk->n_b = g.n_qb;
      walk->layers += 1;
      walk->w = std::move(new_w);
    }
    if (stats) stats->flops += flops;
    return l;
  }

  double predicted_density(const Problem& p) const override { return density_; }

  double predicted_select_flops(const Problem& p) const override {
    int D = 1, log_d = 0;
    while (D < p.d) D <<= 1, ++log_d;
    int m = std::min(sketch_dim_, D);
    detail::BlockGrid g(p, block_);
    double sketch = (double(p.n_heads) * g.n_qb + double(p.n_kv_heads) * g.n_kb) *
                    (double(p.d) + double(D) * log_d + m);
    double walk = p.n_q == p.n_k ? double(p.n_heads) * g.n_qb * g.n_qb * g.n_kb : 0.0;
    return detail::pooled_scoring_flops(p, block_, m + 3) + sketch + walk;
  }

 private:
  // rownorm(A W_prev) over visible blocks; A is zero outside them, so causal stays causal.
  static std::vector<double> walk_step(const std::vector<double>& a,
                                       const std::vector<double>& prev, const detail::BlockGrid& g,
                                       double* flops) {
    int n = g.n_kb;
    std::vector<double> w(size_t(g.n_qb) * n, 0.0);
    for (int r = 0; r < g.n_qb; ++r) {
      double* wr = w.data() + size_t(r) * n;
      for (int m = 0; m < g.n_vis[r]; ++m) {
        double arm = a[size_t(r) * n + m];
        const double* pm = prev.data() + size_t(m) * n;
        for (int c = 0; c < n; ++c) wr[c] += arm * pm[c];
      }
      double sum = 0;
      for (int c = 0; c < n; ++c) sum += wr[c];
      if (sum > 0)
        for (int c = 0; c < n; ++c) wr[c] /= sum;
      *flops += 2.0 * g.n_vis[r] * n + 2.0 * n;
    }
    return w;
  }

  // Kept key blocks of query block r: current and first blocks, then the best mixed scores.
  std::vector<int32_t> choose(const std::vector<double>& a, const std::vector<double>& w,
                              const detail::BlockGrid& g, int r) const {
    int nv = g.n_vis[r];
    std::vector<int32_t> keep;
    if (nv == 0) return keep;
    keep.push_back(0);
    if (g.diag[r] != 0) keep.push_back(g.diag[r]);
    int budget = std::clamp(int(std::lround(density_ * nv)), int(keep.size()), nv);
    std::vector<int32_t> order;
    for (int c = 1; c < nv; ++c)
      if (c != g.diag[r]) order.push_back(c);
    auto score = [&](int c) {
      size_t e = size_t(r) * g.n_kb + c;
      return 0.5 * a[e] + 0.5 * w[e];
    };
    int take = std::min<int>(budget - int(keep.size()), int(order.size()));
    std::partial_sort(order.begin(), order.begin() + take, order.end(), [&](int x, int y) {
      double sx = score(x), sy = score(y);
      return sx != sy ? sx > sy : x < y;
    });
    keep.insert(keep.end(), order.begin(), order.begin() + take);
    std::sort(keep.begin(), keep.end());
    return keep;
  }

  int block_;
  double density_;
  int sketch_dim_;
  uint64_t seed_;
};

VariantInfo sketch_walk_info() {
  return {"sketch_walk",
          "Sketch&Walk",
          "dynamic",
          "arXiv preprint, Scout Before You Attend: Sketch-and-Walk Sparse Attention for Efficient "
          "LLM Inference",
          "Hadamard sketches estimate block attention; a walk across layers accumulates it; the "
          "best blocks are kept.",
          {int_param("block", 1, 4096, 64, "block length in tokens (queries and keys)"),
           float_param("density", 0.01, 1.0, 0.2, "target fraction of visible blocks kept"),
           int_param("sketch_dim", 1, 1024, 16, "sketch coordinates kept (<= padded head dim)"),
           int_param("seed", 0, 1e9, 0, "seed of the random signs and coordinates")}};
}

std::shared_ptr<const Pattern> make_sketch_walk(const Params& params) {
  return std::make_shared<SketchWalkPattern>(int(params.at("block")), params.at("density"),
                                             int(params.at("sketch_dim")),
                                             uint64_t(params.at("seed")));
}

}  // namespace

const PatternFactory kSketchWalkPattern = {sketch_walk_info, make_sketch_walk};

}  // namespace attn
