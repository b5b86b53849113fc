// The tile query must equal pooling the full probability matrix, computed here independently.
#include <gtest/gtest.h>

#include <cmath>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/probabilities.h"
#include "compute/registry.h"

using namespace attn;

namespace {

// Full probability matrix of one head in double, straight from the definition.
std::vector<double> full_matrix(const Variant& v, const Problem& p, const Layout& l, int h) {
  std::vector<double> m(size_t(p.n_q) * p.n_k, 0.0);
  for (int i = 0; i < p.n_q; ++i) {
    std::vector<int> keys;
    std::vector<double> s;
    for (int j = 0; j < p.n_k; ++j) {
      if (!layout_keeps(l, p, h, i, j)) continue;
      double dot = 0;
      for (int c = 0; c < p.d; ++c) dot += double(p.q_row(h, i)[c]) * p.k_row(h, j)[c];
      keys.push_back(j);
      s.push_back(apply_score_mods(v.mods(), dot * p.effective_scale(), h, p.n_heads, p.qpos(i),
                                   p.kpos(j)));
    }
    double stat = normaliser_row_stat(v.normaliser(), s.data(), int(s.size()));
    for (size_t e = 0; e < keys.size(); ++e)
      m[size_t(i) * p.n_k + keys[e]] = normalised_prob(v.normaliser(), s[e], stat, p.n_k);
  }
  return m;
}

void expect_tile_matches(const std::string& spec, bool causal, Pool pool, int q0, int q1, int k0,
                         int k1, int w, int h, int n = 301, int n_q = 0) {
  Problem p = random_problem(2, 1, n_q ? n_q : n, n, 24, causal, 99);
  Variant v = make_variant(spec);
  auto backend = make_backend("reference");
  Result r = run(v, p, *backend);
  const int head = 1;
  std::vector<double> full = full_matrix(v, p, r.layout, head);
  Tile t = tile_probabilities(v, p, r, {head, q0, q1, k0, k1, w, h, pool});
  ASSERT_EQ(t.w, std::min(w, k1 - k0));
  ASSERT_EQ(t.h, std::min(h, q1 - q0));
  for (int y = 0; y < t.h; ++y)
    for (int x = 0; x < t.w; ++x) {
      int r0 = q0 + y * (q1 - q0) / t.h, r1 = q0 + (y + 1) * (q1 - q0) / t.h;
      int c0 = k0 + x * (k1 - k0) / t.w, c1 = k0 + (x + 1) * (k1 - k0) / t.w;
      double want = 0;
      for (int i = r0; i < r1; ++i)
        for (int j = c0; j < c1; ++j) {
          double e = full[size_t(i) * p.n_k + j];
          want = pool == Pool::Max ? std::max(want, e) : want + e;
        }
      if (pool == Pool::Mean) want /= double(r1 - r0) * (c1 - c0);
      ASSERT_NEAR(t.cells[y * t.w + x], want, 1e-5 * std::max(1.0, want))
          << spec << " cell " << y << "," << x;
    }
}

TEST(TileQuery, DenseMaxPoolWholeMatrixOddCells) {
  expect_tile_matches("dense", true, Pool::Max, 0, 301, 0, 301, 37, 23);
}
TEST(TileQuery, DenseMeanPoolSubTile) {
  expect_tile_matches("dense", false, Pool::Mean, 17, 250, 3, 299, 41, 19);
}
TEST(TileQuery, WindowMeanPool) {
  expect_tile_matches("window(size=32)", true, Pool::Mean, 0, 301, 0, 301, 64, 64);
}
TEST(TileQuery, MoreCellsThanEntriesClamps) {
  expect_tile_matches("sinks_window(sinks=4,window=16)", true, Pool::Max, 100, 110, 0, 7, 50, 50);
}
TEST(TileQuery, NormaliserAndModifier) {
  expect_tile_matches("window(size=20)+alibi+entmax15", true, Pool::Max, 0, 301, 0, 301, 30, 30);
}

// Max pooling pools scores before normalising (every normaliser is monotone): each layout kind,
// modifiers, other normalisers, bidirectional and fewer queries than keys, and a long problem.
TEST(TileQuery, MaxPoolDenseBidirectionalSubTile) {
  expect_tile_matches("dense", false, Pool::Max, 17, 250, 3, 299, 41, 19);
}
TEST(TileQuery, MaxPoolBlockAndIndexLayouts) {
  expect_tile_matches("block_topk(block=16,k=3)", true, Pool::Max, 5, 301, 2, 290, 53, 47);
  expect_tile_matches("topk(k=7)", true, Pool::Max, 0, 301, 0, 301, 29, 31);
  expect_tile_matches("top_p(block=16,p=0.8)+sigmoid", true, Pool::Max, 0, 301, 0, 301, 64, 64);
}
TEST(TileQuery, MaxPoolDenseWithModifiersAndNormalisers) {
  expect_tile_matches("dense+softcap(cap=2)", true, Pool::Max, 0, 301, 0, 301, 33, 37);
  expect_tile_matches("dense+relu2", true, Pool::Max, 40, 301, 0, 200, 30, 30);
  expect_tile_matches("dense+softplus", false, Pool::Max, 0, 301, 0, 301, 301, 301);
}
TEST(TileQuery, MaxPoolFewerQueriesThanKeys) {
  expect_tile_matches("dense", true, Pool::Max, 0, 120, 0, 301, 50, 40, 301, 120);
  expect_tile_matches("window(size=40)", true, Pool::Max, 10, 120, 100, 301, 50, 40, 301, 120);
}
TEST(TileQuery, MaxPoolLongProblem) {
  expect_tile_matches("dense", true, Pool::Max, 0, 4133, 0, 4133, 97, 89, 4133);
  expect_tile_matches("sinks_window(sinks=4,window=300)", true, Pool::Max, 1000, 4133, 7, 4100, 61,
                      67, 4133);
}

TEST(TileQuery, BadRequestsAreErrors) {
  Problem p = random_problem(1, 1, 10, 10, 8, true, 1);
  Variant v = make_variant("dense");
  auto backend = make_backend("reference");
  Result r = run(v, p, *backend);
  EXPECT_THROW(tile_probabilities(v, p, r, {0, 0, 11, 0, 10, 4, 4, Pool::Max}), Error);
  EXPECT_THROW(tile_probabilities(v, p, r, {1, 0, 10, 0, 10, 4, 4, Pool::Max}), Error);
  EXPECT_THROW(tile_probabilities(v, p, r, {0, 0, 10, 0, 10, 0, 4, Pool::Max}), Error);
  EXPECT_THROW(tile_probabilities(v, p, r, {0, 5, 5, 0, 10, 4, 4, Pool::Max}), Error);
}

TEST(TileQuery, SelectiveMatchesRowByRow) {
  // Selective rows depend on earlier rows; the tile path replays them once.
  Problem p = random_problem(1, 1, 90, 90, 16, true, 4);
  Variant v = make_variant("selective");
  auto backend = make_backend("reference");
  Result r = run(v, p, *backend);
  Tile t = tile_probabilities(v, p, r, {0, 0, 90, 0, 90, 90, 90, Pool::Max});
  std::vector<double> row;
  for (int i : {0, 1, 45, 89}) {
    probability_row(v, p, r, 0, i, 0, 90, row);
    double sum = 0;
    for (int j = 0; j < 90; ++j) {
      EXPECT_NEAR(t.cells[i * 90 + j], row[j], 1e-6);
      sum += row[j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << i;
  }
}

}  // namespace
