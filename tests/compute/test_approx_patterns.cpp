// Selectors from the approximate-attention literature that keep an explicit set of entries
// (top_theta thresholds, Reformer LSH buckets, Routing Transformer k-means): their kept sets
// against their definitions, the limits in which they keep every visible key, and the cpu
// kernels against the reference on what they keep.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/metrics.h"
#include "compute/registry.h"
#include "test_util.h"

using namespace attn;

namespace {

std::vector<int32_t> row_keys(const Layout& l, const Problem& p, int h, int i) {
  std::vector<int32_t> keys;
  layout_row_keys(l, p, h, i, keys);
  return keys;
}

std::vector<int32_t> visible_keys(const Problem& p, int i) {
  std::vector<int32_t> out;
  for (int j = 0; j < p.n_k; ++j)
    if (p.visible(i, j)) out.push_back(j);
  return out;
}

std::vector<Problem> problems() {
  std::vector<Problem> out;
  uint64_t seed = 31;
  for (bool causal : {true, false})
    for (auto [n_q, n_k] : {std::pair{1, 1}, std::pair{77, 77}, std::pair{9, 140}})
      out.push_back(random_problem(4, 2, n_q, n_k, 16, causal, seed++, 1.5f));
  return out;
}

std::string label(const Problem& p) {
  return std::string(p.causal ? "causal" : "bidir") + " n_q=" + std::to_string(p.n_q) +
         " n_k=" + std::to_string(p.n_k);
}

void expect_keeps_every_visible_key(const std::string& spec, const Problem& p) {
  const Layout l = make_variant(spec).select(p);
  for (int h = 0; h < p.n_heads; ++h)
    for (int i = 0; i < p.n_q; ++i)
      ASSERT_EQ(row_keys(l, p, h, i), visible_keys(p, i)) << spec << " " << label(p);
}

void expect_cpu_matches_reference(const std::string& spec, const Problem& p) {
  const Variant v = make_variant(spec);
  std::unique_ptr<Backend> cpu = make_backend("cpu"), ref = make_backend("reference");
  const Result a = run(v, p, *cpu), b = run(v, p, *ref);
  EXPECT_LT(relative_error(a.o, b.o), 1e-5) << spec << " " << label(p);
  EXPECT_EQ(a.stats.kept_entries, b.stats.kept_entries) << spec;
}

// ---- top_theta -------------------------------------------------------------------------------

TEST(ApproxPatterns, TopThetaKeepsScoresAtTheThreshold) {
  for (const Problem& p : problems()) {
    const double theta = 0.3;
    const Layout l = make_variant("top_theta(theta=0.3)").select(p);
    for (int h = 0; h < p.n_heads; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        std::vector<int32_t> want;
        int best = -1;
        double top = -INFINITY;
        for (int32_t j : visible_keys(p, i)) {
          double s = 0;
          for (int c = 0; c < p.d; ++c) s += double(p.q_row(h, i)[c]) * p.k_row(h, j)[c];
          s *= p.effective_scale();
          if (s >= theta) want.push_back(j);
          if (s > top) top = s, best = j;
        }
        if (want.empty() && best >= 0) want.push_back(best);
        ASSERT_EQ(row_keys(l, p, h, i), want) << label(p) << " h=" << h << " i=" << i;
      }
    expect_cpu_matches_reference("top_theta(theta=0.3)", p);
  }
}

TEST(ApproxPatterns, TopThetaMinusInfinityIsDense) {
  for (const Problem& p : problems()) {
    expect_keeps_every_visible_key("top_theta(theta=-1e30)", p);
    std::unique_ptr<Backend> cpu = make_backend("cpu");
    const Result a = run(make_variant("top_theta(theta=-1e30)"), p, *cpu);
    const Result b = run(make_variant("dense"), p, *cpu);
    EXPECT_LT(relative_error(a.o, b.o), 1e-6) << label(p);
  }
}

TEST(ApproxPatterns, TopThetaCalibratesToTheKeptFraction) {
  const Problem p = random_problem(3, 3, 200, 200, 32, true, 4);
  for (double f : {0.05, 0.2, 0.5}) {
    std::unique_ptr<Backend> cpu = make_backend("cpu");
    const Result r = run(make_variant("top_theta(calibrate=" + std::to_string(f) + ")"), p, *cpu);
    // Every row is calibrated on (n_q <= 256): the fraction is met up to ties and the rows
    // that keep their best key only.
    EXPECT_NEAR(r.stats.density, f, 0.01 + 1.0 / 200) << f;
  }
  // Larger inputs calibrate on sampled rows: close, not exact.
  const Problem big =
      random_problem(1, 1, test::quick() ? 1024 : 4096, test::quick() ? 1024 : 4096, 64, true, 5);
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  const Result r = run(make_variant("top_theta(calibrate=0.1)"), big, *cpu);
  EXPECT_NEAR(r.stats.density, 0.1, 0.03);
  std::unique_ptr<Backend> ref = make_backend("reference");
  const Result rr = run(make_variant("top_theta(calibrate=0.1)"), big, *ref);
  EXPECT_LT(relative_error(r.o, rr.o), 1e-5);
}

// ---- lsh ---------------------------------------------------------------------------------------

TEST(ApproxPatterns, LshOneBucketOneChunkIsDense) {
  for (const Problem& p : problems()) {
    const int n = p.n_q + p.n_k;
    if (p.causal)
      expect_keeps_every_visible_key(
          "lsh(buckets=1,chunk=" + std::to_string(std::max(p.n_q, p.n_k)) + ")", p);
    expect_keeps_every_visible_key("lsh(buckets=1,chunk=" + std::to_string(n) + ")", p);
  }
}

TEST(ApproxPatterns, LshRoundsUnionAndStayWithinChunks) {
  for (const Problem& p : problems()) {
    const Layout one = make_variant("lsh(buckets=4,rounds=1,chunk=8,seed=3)").select(p);
    const Layout two = make_variant("lsh(buckets=4,rounds=2,chunk=8,seed=3)").select(p);
    for (int h = 0; h < p.n_heads; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        const std::vector<int32_t> a = row_keys(one, p, h, i), b = row_keys(two, p, h, i);
        ASSERT_TRUE(std::includes(b.begin(), b.end(), a.begin(), a.end())) << label(p);
        // At most two chunks of keys per round, plus the query's own token.
        ASSERT_LE(a.size(), size_t(2 * 8 + 1)) << label(p);
        for (int32_t j : a) ASSERT_TRUE(p.visible(i, j));
      }
    expect_cpu_matches_reference("lsh(buckets=4,rounds=2,chunk=8,seed=3)", p);
  }
  // Deterministic for a seed, different across seeds.
  const Problem p = random_problem(2, 2, 300, 300, 16, true, 2);
  const Layout a = make_variant("lsh(buckets=8,seed=1)").select(p);
  const Layout b = make_variant("lsh(buckets=8,seed=1)").select(p);
  const Layout c = make_variant("lsh(buckets=8,seed=2)").select(p);
  EXPECT_EQ(a.index(0).col, b.index(0).col);
  EXPECT_NE(a.index(0).col, c.index(0).col);
  EXPECT_THROW(make_variant("lsh(buckets=3)"), Error);
}

TEST(ApproxPatterns, LshLongInputIsSparseAndRunsOnTheCpu) {
  const int n = test::quick() ? 1024 : 4096;
  const Problem p = random_problem(2, 1, n, n, 64, true, 8);
  std::unique_ptr<Backend> cpu = make_backend("cpu"), ref = make_backend("reference");
  const Variant v = make_variant("lsh(buckets=16,rounds=2,chunk=64)");
  const Result a = run(v, p, *cpu);
  EXPECT_LT(a.stats.density, n >= 4096 ? 0.1 : 0.2);  // chunks of 64 keys: sparser as N grows
  // The kernels computed only kept entries: flops in proportion to the density.
  EXPECT_LT(a.stats.counted.flops, 0.2 * 4.0 * p.d * double(visible_entries(p)) * p.n_heads);
  const Result b = run(v, p, *ref);
  EXPECT_LT(relative_error(a.o, b.o), 1e-5);
}

// ---- kmeans ------------------------------------------------------------------------------------

TEST(ApproxPatterns, KmeansOneClusterIsDense) {
  for (const Problem& p : problems()) expect_keeps_every_visible_key("kmeans(clusters=1)", p);
}

TEST(ApproxPatterns, KmeansClustersPartitionTheKeys) {
  // Bidirectional: two queries' kept sets are equal (same cluster) or disjoint, apart from the
  // fallback key of a query whose cluster holds no key.
  const Problem p = random_problem(2, 2, 120, 120, 16, false, 7);
  const Layout l = make_variant("kmeans(clusters=6,iters=5,seed=2)").select(p);
  for (int h = 0; h < p.n_heads; ++h) {
    std::set<std::vector<int32_t>> sets;
    for (int i = 0; i < p.n_q; ++i) sets.insert(row_keys(l, p, h, i));
    std::vector<int> owner(size_t(p.n_k), -1);
    int id = 0;
    for (const auto& s : sets) {
      if (s.size() > 1)
        for (int32_t j : s) {
          EXPECT_EQ(owner[size_t(j)], -1) << "key " << j << " in two clusters";
          owner[size_t(j)] = id;
        }
      ++id;
    }
    EXPECT_LE(sets.size(), 6u + 1);
  }
  for (const Problem& q : problems()) expect_cpu_matches_reference("kmeans(clusters=4,iters=3)", q);
}

TEST(ApproxPatterns, KmeansFindsPlantedClusters) {
  // Keys and queries around 4 directions: routing keeps most of the dense mass at ~1/4 density.
  Problem p = random_problem(1, 1, 256, 256, 32, false, 3, 0.1f);
  for (int i = 0; i < 256; ++i) {
    p.q[size_t(i) * 32 + size_t(i % 4)] += 6.0f;
    p.k[size_t(i) * 32 + size_t(i % 4)] += 6.0f;
  }
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  const Variant v = make_variant("kmeans(clusters=4,iters=8)");
  const Result r = run(v, p, *cpu), dense = run(make_variant("dense"), p, *cpu);
  const Metrics m = compare(v, p, r, dense);
  EXPECT_NEAR(r.stats.density, 0.25, 0.02);
  EXPECT_GT(m.mass_recall, 0.9);
}

TEST(ApproxPatterns, KmeansTreeWithRoomForEveryoneIsDense) {
  // size >= n_q + n_k: one cluster, no split.
  for (const Problem& p : problems())
    expect_keeps_every_visible_key("kmeans(size=" + std::to_string(p.n_q + p.n_k) + ")", p);
}

TEST(ApproxPatterns, KmeansTreeSplitsIntoBalancedDisjointClusters) {
  // Bidirectional, 120 queries + 120 keys, size 32: the median splits give 8 clusters of 30,
  // so each query keeps the (at most 30) keys of its own cluster, and clusters are disjoint.
  const Problem p = random_problem(2, 2, 120, 120, 16, false, 7);
  const Layout l = make_variant("kmeans(size=32,iters=3,seed=2)").select(p);
  for (int h = 0; h < p.n_heads; ++h) {
    std::set<std::vector<int32_t>> sets;
    for (int i = 0; i < p.n_q; ++i) {
      const std::vector<int32_t> keys = row_keys(l, p, h, i);
      ASSERT_LE(keys.size(), 30u);
      sets.insert(keys);
    }
    std::vector<int> owner(size_t(p.n_k), 0);
    for (const auto& s : sets) {
      if (s.size() < 2) continue;
      for (int32_t j : s) EXPECT_EQ(owner[size_t(j)]++, 0) << "key " << j << " in two clusters";
    }
    EXPECT_LE(sets.size(), 8u * 2);  // a query alone in its cluster keeps its nearest key
  }
  // Deterministic for a seed; odd shapes and both masks run on the cpu as on the reference.
  EXPECT_EQ(l.index(0).col, make_variant("kmeans(size=32,iters=3,seed=2)").select(p).index(0).col);
  for (const Problem& q : problems()) expect_cpu_matches_reference("kmeans(size=5,iters=2)", q);
  EXPECT_THROW(make_variant("kmeans(size=1)"), Error);
}

TEST(ApproxPatterns, KmeansTreeFindsPlantedClusters) {
  // 512 queries and keys around 4 directions, clusters of 128: the tree separates the directions.
  Problem p = random_problem(1, 1, 256, 256, 32, false, 3, 0.1f);
  for (int i = 0; i < 256; ++i) {
    p.q[size_t(i) * 32 + size_t(i % 4)] += 6.0f;
    p.k[size_t(i) * 32 + size_t(i % 4)] += 6.0f;
  }
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  const Variant v = make_variant("kmeans(size=128,iters=4)");
  const Result r = run(v, p, *cpu), dense = run(make_variant("dense"), p, *cpu);
  const Metrics m = compare(v, p, r, dense);
  EXPECT_NEAR(r.stats.density, 0.25, 0.02);
  EXPECT_GT(m.mass_recall, 0.9);
}

TEST(ApproxPatterns, KmeansTreeLongInputCostsNLogN) {
  // N = 4096, causal: each query keeps at most `size` keys; the selection's counted flops are the
  // tree's (levels x members x d), which grow as N log N, not N^2.
  const int n = test::quick() ? 1024 : 4096;
  const Problem p = random_problem(2, 1, n, n, 64, true, 8);
  std::unique_ptr<Backend> cpu = make_backend("cpu"), ref = make_backend("reference");
  const Variant v = make_variant("kmeans(size=256,iters=4)");
  const Layout l = v.select(p);
  for (int h = 0; h < p.n_heads; ++h)
    for (int i = 0; i < p.n_q; i += 97) {
      const std::vector<int32_t> keys = row_keys(l, p, h, i);
      ASSERT_LE(keys.size(), 257u);
      for (int32_t j : keys) ASSERT_TRUE(p.visible(i, j));
    }
  const Result a = run(v, p, *cpu), b = run(v, p, *ref);
  EXPECT_LT(relative_error(a.o, b.o), 1e-5);
  EXPECT_LT(a.stats.density, 0.15);
  // Splits of m members halve them until <= 256; each fits its direction on at most 2048 of
  // them ((3 power steps x 4 + 1 + 3 + 3 iters) d flops each) and projects all m (2 d each).
  const auto tree = [&](int members) {
    double f = 0;
    for (int m = members, nodes = 1; m > 256; m /= 2, nodes *= 2)
      f += nodes * (std::min(m, 2048) * p.d * (12.0 + 4 + 3 * 4) + 2.0 * m * p.d);
    return f * p.n_heads;
  };
  EXPECT_DOUBLE_EQ(v.pattern()->predicted_select_flops(p), tree(2 * n));
  // From N to 4N the tree's work grows less than 4 x the levels' ratio: N log N, not N^2.
  const Problem big = random_problem(2, 1, 4 * n, 4 * n, 64, true, 9);
  const double growth = v.pattern()->predicted_select_flops(big) / tree(2 * n);
  EXPECT_DOUBLE_EQ(growth, tree(8 * n) / tree(2 * n));
  EXPECT_LT(growth, 4.0 * std::log2(8.0 * n / 256) / std::log2(2.0 * n / 256));
}

// ---- loki
// ----------------------------------------------------------------------------------------

TEST(ApproxPatterns, LokiWithFullRankIsExactTopk) {
  for (const Problem& p : problems()) {
    const std::string k = "k=" + std::to_string(std::max(1, p.n_k / 5));
    const Layout a = make_variant("loki(rank=" + std::to_string(p.d) + "," + k + ")").select(p);
    const Layout b = make_variant("topk(" + k + ")").select(p);
    for (int h = 0; h < p.n_heads; ++h)
      for (int i = 0; i < p.n_q; ++i)
        ASSERT_EQ(row_keys(a, p, h, i), row_keys(b, p, h, i)) << label(p) << " i=" << i;
    expect_cpu_matches_reference("loki(rank=4,k=8)", p);
  }
}

TEST(ApproxPatterns, LokiLowRankKeysRecallTopk) {
  // Keys in a 4-dimensional subspace (plus a little noise): rank 4 finds nearly the exact top-k.
  Problem p = random_problem(1, 1, 200, 200, 32, true, 12);
  for (int j = 0; j < 200; ++j)
    for (int c = 4; c < 32; ++c) p.k[size_t(j) * 32 + size_t(c)] *= 0.02f;
  const Layout a = make_variant("loki(rank=4,k=16)").select(p);
  const Layout b = make_variant("topk(k=16)").select(p);
  int64_t same = 0, total = 0;
  for (int i = 0; i < p.n_q; ++i) {
    const std::vector<int32_t> x = row_keys(a, p, 0, i), y = row_keys(b, p, 0, i);
    std::vector<int32_t> both;
    std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(both));
    same += int64_t(both.size());
    total += int64_t(y.size());
  }
  EXPECT_GT(double(same) / double(total), 0.9);
}

// ---- hyper
// ---------------------------------------------------------------------------------------

TEST(ApproxPatterns, HyperOneBlockIsDenseAndBlocksStayBounded) {
  for (const Problem& p : problems()) {
    expect_keeps_every_visible_key("hyper(buckets=1,samples=0,block=" + std::to_string(p.n_k) + ")",
                                   p);
    const Layout l = make_variant("hyper(buckets=4,block=8,samples=3,seed=5)").select(p);
    for (int h = 0; h < p.n_heads; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        const std::vector<int32_t> keys = row_keys(l, p, h, i);
        ASSERT_LE(keys.size(), size_t(8 + 3 + 1)) << label(p);
        for (int32_t j : keys) ASSERT_TRUE(p.visible(i, j));
      }
    expect_cpu_matches_reference("hyper(buckets=4,block=8,samples=3,seed=5)", p);
  }
  EXPECT_THROW(make_variant("hyper(buckets=5)"), Error);
}

}  // namespace
