// Metrics on hand-made cases whose values are known in closed form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/metrics.h"
#include "compute/probabilities.h"
#include "compute/registry.h"

using namespace attn;

namespace {

// Q = 0 makes every softmax row uniform over its visible keys.
Problem uniform_problem(int n, int d, bool causal) {
  Problem p = random_problem(1, 1, n, n, d, causal, 7);
  std::fill(p.q.begin(), p.q.end(), 0.0f);
  return p;
}

// The layer's metrics merged from per-head comparisons equal the whole layer's comparison:
// grouped-query heads, causal and not, a sparse pattern, a dynamic one and an unnormalised one.
TEST(Metrics, MergedHeadMetricsEqualTheLayers) {
  for (bool causal : {true, false})
    for (const char* spec : {"window(size=16)", "topk(k=8)", "dense+sigmoid", "dense"}) {
      const Problem p = random_problem(4, 2, 77, 77, 32, causal, 11);
      auto backend = make_backend("cpu");
      const Variant v = make_variant(spec);
      const Result ref = run(make_variant("dense"), p, *backend);
      const Result var = run(v, p, *backend);
      std::vector<Metrics> heads;
      for (int h = 0; h < p.n_heads; ++h)
        heads.push_back(
            compare(v, head_problem(p, h), head_result(var, p, h), head_result(ref, p, h)));
      const Metrics whole = compare(v, p, var, ref);
      const Metrics merged = merge_head_metrics(v, p, var, ref, heads);
      SCOPED_TRACE(std::string(spec) + (causal ? " causal" : " bidirectional"));
      EXPECT_EQ(merged.rel_error, whole.rel_error);
      EXPECT_EQ(merged.density, whole.density);
      EXPECT_NEAR(merged.mass_recall, whole.mass_recall, 1e-6);
      if (std::isnan(whole.row_kl))
        EXPECT_TRUE(std::isnan(merged.row_kl));
      else
        EXPECT_NEAR(merged.row_kl, whole.row_kl, 1e-6);
      ASSERT_EQ(merged.entropy.size(), whole.entropy.size());
      for (size_t i = 0; i < whole.entropy.size(); ++i)
        ASSERT_NEAR(merged.entropy[i], whole.entropy[i], 1e-4) << i;
      ASSERT_EQ(merged.received.size(), whole.received.size());
      for (size_t i = 0; i < whole.received.size(); ++i)
        ASSERT_NEAR(merged.received[i], whole.received[i], 1e-5) << i;
      EXPECT_EQ(merged.sinks, whole.sinks);
    }
  const Problem p = random_problem(2, 2, 9, 9, 8, true, 3);
  auto backend = make_backend("cpu");
  const Result r = run(make_variant("dense"), p, *backend);
  EXPECT_THROW(merge_head_metrics(make_variant("dense"), p, r, r, {}), Error);  // no heads
}

// A head compared from its softmax rows (HeadComparison over softmax_rows() blocks, what the
// head grid does to share the rows with the role scores) gives compare() of the head's slices:
// grouped-query heads, causal and not, dense, static and dynamic patterns, rows in blocks of 64
// (and 2,000-row blocks, one block), the dense reference against itself.
TEST(Metrics, HeadComparisonFromSoftmaxRowsEqualsCompare) {
  for (bool causal : {true, false})
    for (const char* spec : {"dense", "window(size=16)", "topk(k=8)"})
      for (int block : {64, 2000}) {
        const Problem p = random_problem(4, 2, 150, 150, 16, causal, 13);
        auto backend = make_backend("cpu");
        const Variant v = make_variant(spec);
        ASSERT_TRUE(plain_softmax(v));
        const Result ref = run(make_variant("dense"), p, *backend);
        const Result run_var = run(v, p, *backend);
        const Result& var = std::string(spec) == "dense" ? ref : run_var;
        for (int h = 0; h < p.n_heads; ++h) {
          SCOPED_TRACE(std::string(spec) + (causal ? " causal" : " bidirectional") + " head " +
                       std::to_string(h) + " block " + std::to_string(block));
          HeadComparison cmp(p, var, ref, h);
          SoftmaxRows rows;
          for (int i0 = 0; i0 < p.n_q; i0 += block) {
            softmax_rows(p, var, h, i0, std::min(p.n_q, i0 + block), rows);
            cmp.add(rows);
          }
          const Metrics got = cmp.metrics();
          const Metrics want =
              compare(v, head_problem(p, h), head_result(var, p, h), head_result(ref, p, h));
          EXPECT_NEAR(got.rel_error, want.rel_error, 1e-12);
          EXPECT_EQ(got.density, want.density);
          EXPECT_EQ(got.stats.kept_entries, want.stats.kept_entries);
          EXPECT_NEAR(got.mass_recall, want.mass_recall, 1e-6);
          EXPECT_NEAR(got.row_kl, want.row_kl, 1e-5);
          ASSERT_EQ(got.entropy.size(), want.entropy.size());
          for (size_t i = 0; i < want.entropy.size(); ++i)
            ASSERT_NEAR(got.entropy[i], want.entropy[i], 1e-5) << i;
          ASSERT_EQ(got.received.size(), want.received.size());
          for (size_t j = 0; j < want.received.size(); ++j)
            ASSERT_NEAR(got.received[j], want.received[j], 1e-6) << j;
          EXPECT_EQ(got.sink_score, got.received);
          EXPECT_EQ(got.sinks, want.sinks);
          // Every row is a distribution over its kept keys, 0 elsewhere.
          softmax_rows(p, var, h, 0, p.n_q, rows);
          for (int i = 0; i < p.n_q; ++i) {
            double sum = 0;
            for (int j = 0; j < p.n_k; ++j) {
              const double a = rows.row(i)[j];
              if (!layout_keeps(var.layout, p, h, i, j)) {
                ASSERT_EQ(a, 0.0) << i << "," << j;
              }
              sum += a;
            }
            ASSERT_NEAR(sum, 1.0, 1e-5) << i;
            ASSERT_NEAR(rows.mass[size_t(i)], sum, 1e-5) << i;
          }
        }
      }
}

// One SoftmaxRows reused for results of different patterns (as the head grid passes every panel
// of a head through one): a call clears only the last call's span of keys, so each block must
// equal a fresh computation, zero outside its own kept keys, whichever pattern went before.
TEST(Metrics, SoftmaxRowsReusedAcrossPatternsEqualFreshRows) {
  const Problem p = random_problem(2, 2, 300, 300, 16, true, 21);
  auto backend = make_backend("cpu");
  std::vector<Result> results;
  for (const char* spec : {"dense", "window(size=16)", "topk(k=8)", "dense", "window(size=40)"})
    results.push_back(run(make_variant(spec), p, *backend));
  SoftmaxRows shared;
  for (int h = 0; h < p.n_heads; ++h)
    for (int i0 = 0; i0 < p.n_q; i0 += 64)
      for (size_t k = 0; k < results.size(); ++k) {
        SCOPED_TRACE("head " + std::to_string(h) + " rows " + std::to_string(i0) + " result " +
                     std::to_string(k));
        const int i1 = std::min(p.n_q, i0 + 64);
        SoftmaxRows fresh;
        softmax_rows(p, results[k], h, i0, i1, fresh);
        softmax_rows(p, results[k], h, i0, i1, shared);
        ASSERT_EQ(shared.p, fresh.p);
        ASSERT_EQ(shared.mass, fresh.mass);
        ASSERT_LE(shared.hi, p.n_k);
        for (int i = i0; i < i1; ++i)
          for (int j = 0; j < p.n_k; ++j)
            if (j < shared.lo || j >= shared.hi) {
              ASSERT_EQ(shared.row(i)[j], 0.0) << i << "," << j;
            }
      }
}

TEST(Metrics, RelativeErrorByHand) {
  EXPECT_DOUBLE_EQ(relative_error({3, 4}, {3, 4}), 0.0);
  // Equal outputs: 0, or NaN where an entry is not finite (wherever it sits in the vector).
  std::vector<float> equal(37, 1.5f);
  EXPECT_DOUBLE_EQ(relative_error(equal, equal), 0.0);
  for (size_t at : {size_t(0), size_t(20), size_t(36)}) {
    std::vector<float> bad = equal;
    bad[at] = std::numeric_limits<float>::infinity();
    EXPECT_TRUE(std::isnan(relative_error(bad, bad))) << at;
    bad[at] = std::nanf("");
    EXPECT_TRUE(std::isnan(relative_error(bad, bad))) << at;
  }
  EXPECT_NEAR(relative_error({3, 4}, {0, 5}), std::sqrt(9.0 + 1.0) / 5.0, 1e-12);
  EXPECT_THROW(relative_error({1, 2}, {1}), Error);
}

TEST(Metrics, WindowOnUniformRowsHasClosedForm) {
  const int n = 50, w = 8;
  Problem p = uniform_problem(n, 16, true);
  auto backend = make_backend("reference");
  Result ref = run(make_variant("dense"), p, *backend);
  Variant win = make_variant("window(size=8)");
  Result var = run(win, p, *backend);
  Metrics m = compare(win, p, var, ref);
  double recall = 0, kl = 0, kept = 0;
  for (int i = 0; i < n; ++i) {
    double keep = std::min(i + 1, w);
    recall += keep / (i + 1);
    kl += std::log((i + 1) / keep);
    kept += keep;
    EXPECT_NEAR(m.entropy[i], std::log(keep), 1e-6) << "row " << i;
  }
  EXPECT_NEAR(m.mass_recall, recall / n, 1e-6);  // row stats are stored in f32
  EXPECT_NEAR(m.row_kl, kl / n, 1e-6);
  EXPECT_NEAR(m.density, kept / (n * (n + 1) / 2.0), 1e-12);
  // Key j receives 1/min(i+1, w) from each query i in [j, j+w): mean over all n queries.
  for (int j = 0; j < n; ++j) {
    double got = 0;
    for (int i = j; i < std::min(n, j + w); ++i) got += 1.0 / std::min(i + 1, w);
    EXPECT_NEAR(m.received[j], got / n, 1e-6) << "key " << j;
  }
}

TEST(Metrics, DenseAgainstItselfIsExact) {
  Problem p = random_problem(3, 1, 40, 40, 32, true, 11);
  auto backend = make_backend("reference");
  Variant dense = make_variant("dense");
  Result ref = run(dense, p, *backend);
  Metrics m = compare(dense, p, ref, ref);
  EXPECT_EQ(m.rel_error, 0.0);
  EXPECT_NEAR(m.mass_recall, 1.0, 1e-6);
  EXPECT_NEAR(m.row_kl, 0.0, 1e-6);
  EXPECT_DOUBLE_EQ(m.density, 1.0);
  // Received mass sums to one per query row: sum over keys of the mean = 1 per head.
  for (int h = 0; h < 3; ++h) {
    double s = 0;
    for (int j = 0; j < 40; ++j) s += m.received[h * 40 + j];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

TEST(Metrics, SinkIsFoundWhereKeysAttract) {
  const int n = 64, d = 16;
  Problem p = random_problem(2, 2, n, n, d, true, 3, 0.1f);
  // Key 0 aligns with every query: it becomes a sink receiving most of each row's mass.
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < n; ++i) p.q[(h * n + i) * d + 0] = 6.0f;
    p.k[(h * n + 0) * d + 0] = 6.0f;
  }
  auto backend = make_backend("reference");
  Variant dense = make_variant("dense");
  Result ref = run(dense, p, *backend);
  Metrics m = compare(dense, p, ref, ref, 0.3);
  ASSERT_EQ(m.sinks.size(), 1u);
  EXPECT_EQ(m.sinks[0], 0);
  EXPECT_GT(m.sink_score[0], 0.9);
  // Dropping the sink with a window loses that mass: recall falls well below one.
  Variant win = make_variant("window(size=4)");
  Metrics mw = compare(win, p, run(win, p, *backend), ref);
  EXPECT_LT(mw.mass_recall, 0.2);
  Variant sinks = make_variant("sinks_window(sinks=1,window=4)");
  Metrics ms = compare(sinks, p, run(sinks, p, *backend), ref);
  EXPECT_GT(ms.mass_recall, 0.95);
  EXPECT_LT(ms.rel_error, mw.rel_error);
}

TEST(Metrics, KlUndefinedForUnnormalisedRows) {
  Problem p = random_problem(1, 1, 20, 20, 8, true, 5);
  auto backend = make_backend("reference");
  Result ref = run(make_variant("dense"), p, *backend);
  Variant sig = make_variant("sigmoid");
  Metrics m = compare(sig, p, run(sig, p, *backend), ref);
  EXPECT_TRUE(std::isnan(m.row_kl));
  EXPECT_NEAR(m.mass_recall, 1.0, 1e-6);
}

TEST(Metrics, ShapeMismatchIsAnError) {
  Problem p = random_problem(1, 1, 20, 20, 8, true, 5);
  Problem q = random_problem(1, 1, 21, 21, 8, true, 5);
  auto backend = make_backend("reference");
  Variant dense = make_variant("dense");
  Result a = run(dense, p, *backend), b = run(dense, q, *backend);
  EXPECT_THROW(compare(dense, p, a, b), Error);
}

}  // namespace

// compare() takes shortcuts (kept keys only, one GEMM for dense softmax, closed forms for the
// dense-vs-dense ratios); the row-by-row oracle checks it on every layout kind, modifiers,
// normalisers, GQA, bidirectional and fewer queries than keys, odd sizes and N >= 4096.
void expect_same_metrics(const std::string& spec, const Problem& p, const std::string& backend) {
  auto b = make_backend(backend);
  const Variant dense = make_variant("dense"), v = make_variant(spec);
  const Result ref = run(dense, p, *b);
  const Result var = run(v, p, *b);
  for (const bool self : {false, true}) {
    if (self && spec != "dense") continue;
    const Result& r = self ? ref : var;
    const Metrics fast = compare(v, p, r, ref), slow = compare_naive(v, p, r, ref);
    SCOPED_TRACE(spec + (self ? " (self)" : "") + " n=" + std::to_string(p.n_k));
    EXPECT_NEAR(fast.rel_error, slow.rel_error, 1e-12);
    EXPECT_NEAR(fast.mass_recall, slow.mass_recall, 2e-6);
    if (std::isnan(slow.row_kl))
      EXPECT_TRUE(std::isnan(fast.row_kl));
    else
      EXPECT_NEAR(fast.row_kl, slow.row_kl, 2e-6 * std::max(1.0, slow.row_kl));
    ASSERT_EQ(fast.entropy.size(), slow.entropy.size());
    for (size_t i = 0; i < slow.entropy.size(); ++i)
      ASSERT_NEAR(fast.entropy[i], slow.entropy[i], 2e-5 * std::max(1.0f, slow.entropy[i]))
          << "row " << i;
    ASSERT_EQ(fast.received.size(), slow.received.size());
    for (size_t j = 0; j < slow.received.size(); ++j)
      ASSERT_NEAR(fast.received[j], slow.received[j], 2e-6 + 2e-5 * slow.received[j])
          << "key " << j;
    EXPECT_EQ(fast.sinks, slow.sinks);
  }
}

TEST(Metrics, FastCompareMatchesTheOracle) {
  const Problem p = random_problem(3, 1, 157, 157, 24, true, 21, 1.7f);
  for (const char* spec : {"dense", "window(size=17)", "block_topk(block=16,k=2)", "topk(k=9)",
                           "top_p(block=16,p=0.8)", "dense+sigmoid", "dense+softcap(cap=2)",
                           "window(size=9)+alibi+entmax15", "sinks_window(sinks=2,window=20)+relu2",
                           "dense+temperature(t=0.7)", "selective"})
    expect_same_metrics(spec, p, "cpu");
  const Problem bidir = random_problem(4, 2, 93, 93, 16, false, 22, 1.5f);
  for (const char* spec : {"dense", "block_topk(block=8,k=3)", "dense+softplus"})
    expect_same_metrics(spec, bidir, "reference");
  const Problem fewer = random_problem(2, 2, 40, 131, 16, true, 23, 1.5f);
  for (const char* spec : {"dense", "window(size=30)", "dense+sigmoid"})
    expect_same_metrics(spec, fewer, "cpu");
}

TEST(Metrics, FastCompareMatchesTheOracleOnALongProblem) {
  const Problem p = random_problem(1, 1, 4133, 4133, 32, true, 24, 1.6f);
  for (const char* spec : {"dense", "block_topk(block=64,k=4)", "sinks_window(sinks=4,window=256)"})
    expect_same_metrics(spec, p, "cpu");
}
