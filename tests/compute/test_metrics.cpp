// Metrics on hand-made cases whose values are known in closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/metrics.h"
#include "compute/registry.h"

using namespace attn;

namespace {

// Q = 0 makes every softmax row uniform over its visible keys.
Problem uniform_problem(int n, int d, bool causal) {
  Problem p = random_problem(1, 1, n, n, d, causal, 7);
  std::fill(p.q.begin(), p.q.end(), 0.0f);
  return p;
}

TEST(Metrics, RelativeErrorByHand) {
  EXPECT_DOUBLE_EQ(relative_error({3, 4}, {3, 4}), 0.0);
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
