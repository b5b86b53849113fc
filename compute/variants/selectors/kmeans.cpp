// Routing attention (Routing Transformer, Roy, Saffar, Vaswani, Grangier 2021): queries and
// keys of a head are clustered together by spherical k-means (unit vectors, nearest centroid by
// dot product), and each query keeps the keys of its own cluster. Centroids start from
// `clusters` distinct keys drawn with `seed` and take `iters` Lloyd steps over the queries and
// keys together. Each query also keeps its last visible key (its own token), so no row is empty.
// One cluster keeps every visible key.
// Work: iters x (n_q + n_k) x clusters x d for the clustering, then attention only inside the
// clusters (about N^2 / clusters entries for balanced clusters).
//
// With a fixed number of clusters that is quadratic in N, and a flat k-means with N / size
// clusters would be quadratic in its assignment. `size` > 0 therefore builds the clusters as a
// tree: a cluster of more than `size` queries and keys is seeded by its two halves along its
// principal direction, takes `iters` Lloyd steps of spherical 2-means and is split in two equal
// halves at the median of its members' projection on the difference of the two centroids (the
// balanced clusters the paper's implementation uses, one level at a time). Every level costs O((n_q
// + n_k) d), there are log2((n_q + n_k) / size) levels, and each query attends to at most `size`
// keys: O(N log N) in all.
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"
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

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Sizes of the tree's clusters for m members split until each holds at most `size`: the split is
// at the median whatever the data, so the shape (and the cost) is known before selecting.
template <class F>
void visit_splits(int m, int size, F&& on_split) {
  if (m <= size) return;
  on_split(m);
  visit_splits(m / 2, size, on_split);
  visit_splits(m - m / 2, size, on_split);
}

constexpr int kPowerSteps = 3;
constexpr int kSample = 2048;  // members a split direction is fitted on, at most

// Calls f(r0, len) over [0, n) in chunks of rows small enough to stay in L1 (128 rows of d = 64
// floats: 32 KiB), so a pass that reads the rows twice reads memory once.
template <class F>
void for_chunks(int n, F&& f) {
  constexpr int kChunk = 128;
  for (int r0 = 0; r0 < n; r0 += kChunk) f(r0, std::min(kChunk, n - r0));
}

// order[0, n): the members with the `half` largest projections first (ties broken by position:
// a strict order, so the split is deterministic). Sorts packed (projection, position) keys, which
// nth_element compares without chasing indices.
void split_at_median(const Eigen::VectorXf& proj, int n, int half, std::vector<int>& order,
                     std::vector<uint64_t>& keys) {
  for (int r = 0; r < n; ++r) {
    uint32_t u;
    std::memcpy(&u, &proj[r], 4);
    u = (u >> 31) ? ~u : (u | 0x80000000u);  // ascending unsigned order = ascending float order
    keys[size_t(r)] = (uint64_t(~u) << 32) | uint32_t(r);  // larger projections first
  }
  std::nth_element(keys.begin(), keys.begin() + half, keys.begin() + n);
  for (int r = 0; r < n; ++r) order[size_t(r)] = int(keys[size_t(r)] & 0xffffffffu);
}

// c1 - c2 of balanced spherical 2-means on the rows of x (unit rows): the seeds are the two
// halves of x along its principal direction (a few power steps on the centred rows, from a seeded
// random vector), then `iters` Lloyd steps. Two rows as seeds could stall 2-means on a symmetric
// saddle (seeds from two of four equal groups leave the other two split by noise); the halves of
// a high-variance direction cannot. proj, order and keys are scratch of at least x.rows().
Eigen::RowVectorXf split_direction(const Eigen::Ref<const RowMat>& x, int iters,
                                   detail::SplitMix64& g, Eigen::VectorXf& proj,
                                   std::vector<int>& order, std::vector<uint64_t>& keys) {
  const int n = int(x.rows()), d = int(x.cols());
  const Eigen::RowVectorXf mu = x.colwise().mean();
  Eigen::RowVectorXf v(d), w(d);
  for (int t = 0; t < d; ++t) v[t] = float(double(g.next() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  for (int step = 0; step < kPowerSteps; ++step) {
    // w = Xc^T Xc v with Xc the centred members: sum of (x - mu).v times x, minus mu x the sum.
    const float mv = mu.dot(v);
    w.setZero();
    float total = 0;
    for_chunks(n, [&](int r0, int len) {  // both products on a chunk while it is in cache
      const auto rows = x.middleRows(r0, len);
      auto u = proj.segment(r0, len);
      u.noalias() = rows * v.transpose();
      u.array() -= mv;
      w.noalias() += u.transpose() * rows;
      total += u.sum();
    });
    w -= total * mu;
    if (!(w.squaredNorm() > 0)) break;  // every member equal: any split will do
    v = w.normalized();
  }
  proj.head(n).noalias() = x * v.transpose();
  const int half = n / 2;
  split_at_median(proj, n, half, order, keys);
  // Sums of one side only: the other is the members' total (n mu) minus it.
  const Eigen::RowVectorXf all = float(n) * mu;
  Eigen::RowVectorXf c1 = Eigen::RowVectorXf::Zero(d), c2;
  for (int r = 0; r < half; ++r) c1 += x.row(order[size_t(r)]);
  c2 = all - c1;
  if (c1.squaredNorm() > 0) c1.normalize();
  if (c2.squaredNorm() > 0) c2.normalize();
  for (int it = 0; it < iters; ++it) {
    const Eigen::RowVectorXf diff = c1 - c2;
    Eigen::RowVectorXf s1 = Eigen::RowVectorXf::Zero(d);
    int n1 = 0;
    for_chunks(n, [&](int r0, int len) {
      auto u = proj.segment(r0, len);
      u.noalias() = x.middleRows(r0, len) * diff.transpose();
      for (int r = r0; r < r0 + len; ++r)
        if (proj[r] >= 0) s1 += x.row(r), ++n1;
    });
    const Eigen::RowVectorXf s2 =
        n1 < n ? Eigen::RowVectorXf(all - s1) : Eigen::RowVectorXf::Zero(d);
    // An empty side (or a zero mean) keeps its centroid.
    if (s1.squaredNorm() > 0) c1 = s1.normalized();
    if (s2.squaredNorm() > 0) c2 = s2.normalized();
  }
  return c1 - c2;
}

// Leaf (cluster) id of each row (unit rows): balanced 2-means splits until a
// cluster holds at most `size` rows. Rows are kept grouped by cluster in a permuted copy, so every
// step is a matrix-vector product over one contiguous range.
std::vector<int> tree_clusters(RowMat rows, int size, int iters, uint64_t seed) {
  const int m = int(rows.rows()), d = int(rows.cols());
  std::vector<int> id(static_cast<size_t>(m));
  std::iota(id.begin(), id.end(), 0);
  std::vector<int> leaf(static_cast<size_t>(m), 0);
  std::vector<int> order(static_cast<size_t>(m));
  Eigen::VectorXf proj(m);
  // Scratch for reordering a cluster's members, allocated once (fresh pages are slow to fault in).
  RowMat moved(m, d);
  std::vector<int> moved_id(static_cast<size_t>(m));
  std::vector<uint64_t> keys(static_cast<size_t>(m));
  std::vector<int> pick(static_cast<size_t>(m));
  RowMat sample(std::min(m, kSample), d);
  int n_leaves = 0;
  uint64_t node = 0;
  std::vector<std::pair<int, int>> todo = {{0, m}};
  while (!todo.empty()) {
    const auto [lo, hi] = todo.back();
    todo.pop_back();
    const int n = hi - lo;
    if (n <= size) {
      for (int r = lo; r < hi; ++r) leaf[size_t(id[size_t(r)])] = n_leaves;
      ++n_leaves;
      continue;
    }
    auto block = rows.middleRows(lo, n);
    detail::SplitMix64 g(detail::mix_seed(seed, node++));
    // The split direction is fitted on at most kSample members drawn at random (mini-batch
    // k-means, Sculley 2010): the top levels then cost one projection of every member, not
    // iters, so the tree's cost grows as N log N with a small constant.
    Eigen::RowVectorXf diff;
    if (n > kSample) {
      std::iota(pick.begin(), pick.begin() + n, 0);
      for (int r = 0; r < kSample; ++r) {
        std::swap(pick[size_t(r)], pick[size_t(r) + g.below(uint64_t(n - r))]);
        sample.row(r) = block.row(pick[size_t(r)]);
      }
      diff = split_direction(sample, iters, g, proj, order, keys);
    } else {
      diff = split_direction(block, iters, g, proj, order, keys);
    }
    proj.head(n).noalias() = block * diff.transpose();
    const int half = n / 2;
    split_at_median(proj, n, half, order, keys);
    for (int r = 0; r < n; ++r) {
      moved.row(r) = block.row(order[size_t(r)]);
      moved_id[size_t(r)] = id[size_t(lo + order[size_t(r)])];
    }
    block = moved.topRows(n);
    std::copy_n(moved_id.begin(), n, id.begin() + lo);
    todo.push_back({lo + half, hi});
    todo.push_back({lo, lo + half});
  }
  return leaf;
}

class KmeansPattern final : public Pattern {
 public:
  KmeansPattern(int clusters, int iters, uint64_t seed, int size)
      : clusters_(clusters), iters_(iters), size_(size), seed_(seed) {}
  VariantInfo info() const override { return kKmeansPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    if (size_ > 0) {
      parallel_for(p.n_heads, [&](int h) {
        // Queries then keys, as unit rows.
        RowMat x(p.n_q + p.n_k, p.d);
        x.topRows(p.n_q) = Eigen::Map<const RowMat>(p.q_row(h, 0), p.n_q, p.d);
        x.bottomRows(p.n_k) = Eigen::Map<const RowMat>(p.k_row(h, 0), p.n_k, p.d);
        for (int r = 0; r < x.rows(); ++r) {
          const float norm = x.row(r).norm();
          if (norm > 0) x.row(r) /= norm;  // zero rows stay zero
        }
        const std::vector<int> leaf =
            tree_clusters(std::move(x), size_, iters_, detail::mix_seed(seed_, uint64_t(h)));
        l.indices[size_t(h)] = rows_from_clusters(p, leaf, leaf.data() + p.n_q);
      });
      if (stats) stats->flops += predicted_select_flops(p);
      return l;
    }
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
      l.indices[size_t(h)] = rows_from_clusters(p, qa, ka.data());
    });
    if (stats) stats->flops += predicted_select_flops(p);
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    if (size_ > 0) {
      // A split of n members fits its direction on ns = min(n, kSample) of them: per fitted
      // member the power steps (two products, 4 d flops, and d for the mean), the seeding
      // projection and half sums (3 d), iters Lloyd steps (a projection and a sum, 3 d); then
      // every member is projected (2 d). Moves and sampling are not counted.
      double flops = 0;
      visit_splits(p.n_q + p.n_k, size_, [&](int n) {
        const double ns = std::min(n, kSample);
        flops += ns * p.d * (4.0 * kPowerSteps + 1 + 3 + 3.0 * iters_) + double(n) * 2 * p.d;
      });
      return double(p.n_heads) * flops;
    }
    const double m = std::min(clusters_, p.n_k);
    return double(p.n_heads) * (iters_ + 1) * (double(p.n_q) + p.n_k) * m * 2.0 * p.d;
  }

 private:
  // Each query keeps the visible keys of its own cluster (ascending), plus its last visible key
  // (causal) or its nearest key (bidirectional) when that leaves it none.
  static IndexLayout rows_from_clusters(const Problem& p, const std::vector<int>& q_cluster,
                                        const int* k_cluster) {
    const int m = p.n_k == 0 ? 0 : *std::max_element(k_cluster, k_cluster + p.n_k) + 1;
    std::vector<std::vector<int32_t>> members(static_cast<size_t>(m));
    for (int j = 0; j < p.n_k; ++j) members[size_t(k_cluster[j])].push_back(j);
    static const std::vector<int32_t> none;
    std::vector<std::vector<int32_t>> rows(size_t(p.n_q));
    for (int i = 0; i < p.n_q; ++i) {
      const int c = q_cluster[size_t(i)];
      const std::vector<int32_t>& mine = c < m ? members[size_t(c)] : none;
      const int last = p.causal ? detail::last_visible_key(p, i) : p.n_k - 1;
      std::vector<int32_t>& keep = rows[size_t(i)];
      for (int32_t j : mine) {
        if (j > last) break;
        keep.push_back(j);
      }
      if (p.causal && last >= 0 && (keep.empty() || keep.back() != last)) keep.push_back(last);
      if (!p.causal && keep.empty()) keep.push_back(std::clamp(p.qpos(i), 0, p.n_k - 1));
    }
    return detail::index_layout_from_rows(rows);
  }

  int clusters_, iters_, size_;
  uint64_t seed_;
};

VariantInfo kmeans_info() {
  ParamSpec clusters = int_param("clusters", 1, 65536, 8, "clusters (at most n_k are used)");
  clusters.unused_when = "size";
  return {"kmeans",
          "k-means routing (Routing Transformer)",
          "dynamic",
          "Roy, Saffar, Vaswani, Grangier 2021, Efficient Content-Based Sparse Attention with "
          "Routing Transformers",
          "Queries and keys clustered by spherical k-means; each query attends to the keys of "
          "its cluster.",
          {clusters, int_param("iters", 0, 100, 4, "Lloyd iterations"),
           int_param("seed", 0, 1000000000, 0, "random seed of the initial centroids"),
           int_param("size", 0, 1 << 24, 0,
                     "when > 0: balanced clusters of at most this many queries and keys, split "
                     "in two until they fit (O(N log N); `clusters` unused)")}};
}

std::shared_ptr<const Pattern> make_kmeans(const Params& params) {
  const int size = int(params.at("size"));
  if (size == 1)
    throw Error(ErrorCode::InvalidArgument,
                "kmeans: size must be 0 (a fixed number of clusters) or at least 2");
  return std::make_shared<KmeansPattern>(int(params.at("clusters")), int(params.at("iters")),
                                         uint64_t(params.at("seed")), size);
}

}  // namespace

const PatternFactory kKmeansPattern = {kmeans_info, make_kmeans};

}  // namespace attn
