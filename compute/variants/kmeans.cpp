// Routing attention (Routing Transformer, Roy, Saffar, Vaswani, Grangier 2021): queries and
// keys of a head are clustered together by spherical k-means (unit vectors, nearest centroid by
// dot product), and each query keeps the keys of its own cluster. Centroids start from
// `clusters` distinct keys drawn with `seed` and take `iters` Lloyd steps over the queries and
// keys together. Each query also keeps its last visible key (its own token), so no row is empty.
// One cluster keeps every visible key.
// Work: iters x (n_q + n_k) x clusters x d for the clustering, then attention only inside the
// clusters (about N^2 / clusters entries for balanced clusters).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selector_util.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

// Unit rows of x (f32 [n, d]); zero rows stay zero.
std::vector<float> unit_rows(const float* x, int n, int d) {
  std::vector<float> out(x, x + size_t(n) * d);
  for (int i = 0; i < n; ++i) {
    float* r = out.data() + size_t(i) * d;
    double s = 0;
    for (int c = 0; c < d; ++c) s += double(r[c]) * r[c];
    if (s > 0)
      for (int c = 0; c < d; ++c) r[c] = float(r[c] / std::sqrt(s));
  }
  return out;
}

// Nearest centroid (largest dot product) of each row: rows f32 [n, d], cents f32 [m, d].
void assign(const std::vector<float>& rows, int n, const std::vector<float>& cents, int m, int d,
            std::vector<int>& out) {
  out.assign(size_t(n), 0);
  for (int i = 0; i < n; ++i) {
    double top = -INFINITY;
    for (int c = 0; c < m; ++c) {
      const double s = detail::dot(rows.data() + size_t(i) * d, cents.data() + size_t(c) * d, d);
      if (s > top) top = s, out[size_t(i)] = c;
    }
  }
}

class KmeansPattern final : public Pattern {
 public:
  KmeansPattern(int clusters, int iters, uint64_t seed)
      : clusters_(clusters), iters_(iters), seed_(seed) {}
  VariantInfo info() const override { return kKmeansPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    const int m = std::min(clusters_, p.n_k);
    parallel_for(p.n_heads, [&](int h) {
      const int d = p.d;
      const std::vector<float> q = unit_rows(p.q_row(h, 0), p.n_q, d);
      const std::vector<float> k = unit_rows(p.k_row(h, 0), p.n_k, d);
      // Initial centroids: m distinct keys, a seeded partial shuffle.
      std::vector<int> order(size_t(p.n_k));
      std::iota(order.begin(), order.end(), 0);
      detail::SplitMix64 g(detail::mix_seed(seed_, uint64_t(h)));
      for (int c = 0; c < m; ++c)
        std::swap(order[size_t(c)], order[size_t(c) + g.below(uint64_t(p.n_k - c))]);
      std::vector<float> cents(size_t(m) * d);
      for (int c = 0; c < m; ++c)
        std::copy_n(k.data() + size_t(order[size_t(c)]) * d, d, cents.data() + size_t(c) * d);
      std::vector<int> qa, ka;
      for (int it = 0; it < iters_; ++it) {
        assign(q, p.n_q, cents, m, d, qa);
        assign(k, p.n_k, cents, m, d, ka);
        std::vector<double> sum(size_t(m) * d, 0.0);
        std::vector<int> count(size_t(m), 0);
        auto add = [&](const std::vector<float>& x, const std::vector<int>& a, int n) {
          for (int i = 0; i < n; ++i) {
            ++count[size_t(a[size_t(i)])];
            for (int c = 0; c < d; ++c) sum[size_t(a[size_t(i)]) * d + c] += x[size_t(i) * d + c];
          }
        };
        add(q, qa, p.n_q);
        add(k, ka, p.n_k);
        for (int c = 0; c < m; ++c) {
          double norm = 0;
          for (int t = 0; t < d; ++t) norm += sum[size_t(c) * d + t] * sum[size_t(c) * d + t];
          if (count[size_t(c)] == 0 || norm == 0) continue;  // an empty cluster keeps its centroid
          for (int t = 0; t < d; ++t)
            cents[size_t(c) * d + t] = float(sum[size_t(c) * d + t] / std::sqrt(norm));
        }
      }
      assign(q, p.n_q, cents, m, d, qa);
      assign(k, p.n_k, cents, m, d, ka);
      // Keys of each cluster, ascending; a query takes its cluster's visible prefix.
      std::vector<std::vector<int32_t>> members(static_cast<size_t>(m));
      for (int j = 0; j < p.n_k; ++j) members[size_t(ka[size_t(j)])].push_back(j);
      std::vector<std::vector<int32_t>> rows(size_t(p.n_q));
      for (int i = 0; i < p.n_q; ++i) {
        const std::vector<int32_t>& mine = members[size_t(qa[size_t(i)])];
        const int last = p.causal ? detail::last_visible_key(p, i) : p.n_k - 1;
        std::vector<int32_t>& keep = rows[size_t(i)];
        for (int32_t j : mine) {
          if (j > last) break;
          keep.push_back(j);
        }
        if (p.causal && last >= 0 && (keep.empty() || keep.back() != last)) keep.push_back(last);
        if (!p.causal && keep.empty()) keep.push_back(std::clamp(p.qpos(i), 0, p.n_k - 1));
      }
      l.indices[size_t(h)] = detail::index_layout_from_rows(rows);
    });
    if (stats) stats->flops += predicted_select_flops(p);
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    const double m = std::min(clusters_, p.n_k);
    return double(p.n_heads) * (iters_ + 1) * (double(p.n_q) + p.n_k) * m * 2.0 * p.d;
  }

 private:
  int clusters_, iters_;
  uint64_t seed_;
};

VariantInfo kmeans_info() {
  return {"kmeans",
          "k-means routing (Routing Transformer)",
          "dynamic",
          "Roy, Saffar, Vaswani, Grangier 2021, Efficient Content-Based Sparse Attention with "
          "Routing Transformers",
          "Queries and keys clustered by spherical k-means; each query attends to the keys of "
          "its cluster.",
          {int_param("clusters", 1, 65536, 8, "clusters (at most n_k are used)"),
           int_param("iters", 0, 100, 4, "Lloyd iterations"),
           int_param("seed", 0, 1000000000, 0, "random seed of the initial centroids")}};
}

std::shared_ptr<const Pattern> make_kmeans(const Params& params) {
  return std::make_shared<KmeansPattern>(int(params.at("clusters")), int(params.at("iters")),
                                         uint64_t(params.at("seed")));
}

}  // namespace

const PatternFactory kKmeansPattern = {kmeans_info, make_kmeans};

}  // namespace attn
