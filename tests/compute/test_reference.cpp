// The reference backend against the textbook formula, and the softmax invariants.
#include <gtest/gtest.h>

#include <cmath>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/probabilities.h"
#include "compute/reference/reference_backend.h"
#include "compute/registry.h"

using namespace attn;

TEST(Reference, DenseEqualsTextbookSoftmax) {
  for (bool causal : {true, false}) {
    Problem p = random_problem(2, 1, 13, 17, 8, causal, 21);  // n_q != n_k, GQA
    auto backend = make_reference_backend();
    Result r = run(make_variant("dense"), p, *backend);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 13; ++i) {
        std::vector<double> s(17, -INFINITY);
        double mx = -INFINITY;
        for (int j = 0; j < 17; ++j) {
          if (causal && j > 4 + i) continue;  // queries are the last 13 of 17 tokens
          double dot = 0;
          for (int c = 0; c < 8; ++c) dot += p.q_row(h, i)[c] * double(p.k_row(h, j)[c]);
          s[j] = dot / std::sqrt(8.0);
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double x : s) sum += std::exp(x - mx);
        for (int c = 0; c < 8; ++c) {
          double o = 0;
          for (int j = 0; j < 17; ++j) o += std::exp(s[j] - mx) / sum * p.v_row(h, j)[c];
          EXPECT_NEAR(r.o_row(h, i)[c], o, 1e-5);
        }
        EXPECT_NEAR(r.row_stat[h * 13 + i], mx + std::log(sum), 1e-5);
      }
  }
}

TEST(Reference, RowsSumToOneAndDroppedEntriesAreZero) {
  Problem p = random_problem(2, 2, 100, 100, 16, true, 5);
  auto backend = make_reference_backend();
  for (const char* spec :
       {"dense", "window(size=10)", "sinks_window(sinks=3,window=10)", "block_topk(block=16,k=2)",
        "topk(k=5)", "dense+entmax15", "window(size=10)+softplus"}) {
    Variant v = make_variant(spec);
    Result r = run(v, p, *backend);
    std::vector<double> row;
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 100; i += 7) {
        probability_row(v, p, r, h, i, 0, 100, row);
        double sum = 0;
        for (int j = 0; j < 100; ++j) {
          if (!layout_keeps(r.layout, p, h, i, j)) {
            EXPECT_EQ(row[j], 0.0) << spec;
          }
          sum += row[j];
        }
        EXPECT_NEAR(sum, 1.0, 1e-6) << spec << " row " << i;
      }
  }
}

TEST(Reference, TopKKeepsExactlyK) {
  Problem p = random_problem(1, 1, 60, 60, 16, true, 8);
  auto backend = make_reference_backend();
  Result r = run(make_variant("topk(k=5)"), p, *backend);
  std::vector<int32_t> keys;
  for (int i = 0; i < 60; ++i) {
    layout_row_keys(r.layout, p, 0, i, keys);
    EXPECT_EQ(int(keys.size()), std::min(i + 1, 5)) << "row " << i;
  }
}
