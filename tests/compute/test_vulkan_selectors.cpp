// The GPU selectors of the vulkan backend (compute/vulkan/selectors.h) against the CPU selectors
// on random inputs: exact top-k (scores and per-row radix select on the GPU) and block top-k
// (pooled block scores on the GPU). f32 scores may round differently from the CPU's, so kept
// sets must be identical except in rows where the CPU's k-th and (k+1)-th scores are within
// `eps` of each other; there every kept score must be >= every dropped score - eps. Each row
// keeps exactly what the CPU keeps in number, and outputs over the GPU's layout match the
// reference within 1e-4. Sizes include N >= 4096 (lavapipe's silent loop limit), odd shapes,
// n_q != n_k, GQA, explicit positions with gaps, k = 0 and k >= visible keys.
#ifdef ATTN_HAVE_VULKAN
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <set>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/fallback.h"
#include "compute/metrics.h"
#include "compute/reference/reference_backend.h"
#include "compute/registry.h"
#include "compute/variants/selectors/selector_util.h"
#include "compute/vulkan/selectors.h"
#include "test_util.h"
#include "test_vulkan_util.h"

using namespace attn;

namespace {

using VulkanSelectorTest = test::VulkanTest;

// Random strictly increasing positions: keys spread over [0, 3 n_k), queries over
// [-10, 3 n_k) (the first queries may see no key at all).
void set_random_positions(Problem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto draw = [&](int n, int lo, int hi) {
    std::set<int32_t> s;
    std::uniform_int_distribution<int32_t> u(lo, hi - 1);
    while (int(s.size()) < n) s.insert(u(rng));
    return std::vector<int32_t>(s.begin(), s.end());
  };
  p.k_pos = draw(p.n_k, 0, 3 * p.n_k);
  p.q_pos = draw(p.n_q, -10, 3 * p.n_k);
}

// Q and K with small integer entries: every score is an exact integer in f32 whatever the
// summation order, so the many exact ties must be broken identically (lower key index).
void make_integer_scores(Problem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(-2, 2);
  for (float& x : p.q) x = float(u(rng));
  for (float& x : p.k) x = float(u(rng));
}

int visible(const Problem& p, int i) {
  return p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
}

double score(const Problem& p, int h, int i, int j) {
  return detail::dot(p.q_row(h, i), p.k_row(h, j), p.d);
}

std::vector<int32_t> index_row(const Layout& l, int h, int i) {
  const IndexLayout& x = l.index(h);
  return {x.col.begin() + x.row_ptr[size_t(i)], x.col.begin() + x.row_ptr[size_t(i) + 1]};
}

std::vector<int32_t> block_row(const Layout& l, int h, int r) {
  const BlockLayout& b = l.block(h);
  return {b.col.begin() + b.row_ptr[size_t(r)], b.col.begin() + b.row_ptr[size_t(r) + 1]};
}

// For kept set `kept` of candidates `cand` with scores s: the smallest kept score minus the
// largest dropped one (>= -eps required), and the gap between the take-th and (take+1)-th best
// scores (sets may differ only where it is <= eps).
struct Boundary {
  double margin = 0, gap = 0;
};
Boundary boundary(const std::vector<int32_t>& cand, const std::vector<int32_t>& kept,
                  const std::function<double(int)>& s) {
  std::set<int32_t> in(kept.begin(), kept.end());
  double kept_min = 1e300, drop_max = -1e300;
  std::vector<double> all;
  for (int32_t c : cand) {
    all.push_back(s(c));
    if (in.count(c))
      kept_min = std::min(kept_min, s(c));
    else
      drop_max = std::max(drop_max, s(c));
  }
  std::sort(all.begin(), all.end(), std::greater<double>());
  Boundary b;
  b.margin = kept_min - drop_max;
  const size_t take = kept.size();
  b.gap = take > 0 && take < all.size() ? all[take - 1] - all[take] : 1e300;
  return b;
}

struct Agreement {
  int64_t rows = 0, rows_differ = 0;
  double worst_margin = 1e300;  // smallest kept-minus-dropped margin over differing rows
};

// GPU top-k layout against the CPU's: counts, ascending visible keys, identical sets unless
// near-tied.
Agreement expect_topk_agrees(const Problem& p, int k, const Layout& gpu, const Layout& cpu,
                             const std::string& what) {
  Agreement a;
  EXPECT_EQ(gpu.kind, Layout::Kind::Indices) << what;
  EXPECT_EQ(int(gpu.indices.size()), p.n_heads) << what;
  for (int h = 0; h < p.n_heads; ++h)
    for (int i = 0; i < p.n_q; ++i) {
      const std::vector<int32_t> g = index_row(gpu, h, i), c = index_row(cpu, h, i);
      const int nv = visible(p, i);
      ++a.rows;
      EXPECT_EQ(int(g.size()), std::min(k, nv)) << what << " h=" << h << " i=" << i;
      for (size_t t = 0; t < g.size(); ++t) {
        EXPECT_TRUE(g[t] >= 0 && g[t] < nv) << what << ": invisible key " << g[t];
        if (t > 0) {
          EXPECT_LT(g[t - 1], g[t]) << what << ": row not ascending";
        }
      }
      if (g == c) continue;
      ++a.rows_differ;
      std::vector<int32_t> cand(static_cast<size_t>(nv));
      for (int j = 0; j < nv; ++j) cand[size_t(j)] = j;
      const double eps = 1e-4 * (1.0 + std::abs(score(p, h, i, c.empty() ? 0 : c[0])));
      Boundary b = boundary(cand, g, [&](int j) { return score(p, h, i, j); });
      Boundary bc = boundary(cand, c, [&](int j) { return score(p, h, i, j); });
      EXPECT_GE(b.margin, -eps) << what << " h=" << h << " i=" << i << ": GPU dropped a better key";
      EXPECT_LE(bc.gap, eps) << what << " h=" << h << " i=" << i
                             << ": sets differ away from a near-tie";
      a.worst_margin = std::min(a.worst_margin, b.margin);
      if (testing::Test::HasFailure()) return a;
    }
  return a;
}

// Block top-k: per query block the current block plus min(k, others) best others.
Agreement expect_block_topk_agrees(const Problem& p, int block, int k, const Layout& gpu,
                                   const Layout& cpu, const std::string& what) {
  Agreement a;
  detail::BlockGrid g(p, block);
  EXPECT_EQ(gpu.kind, Layout::Kind::Blocks) << what;
  EXPECT_EQ(int(gpu.blocks.size()), p.n_heads) << what;
  double flops = 0;
  auto pk = detail::pooled_keys(p, block, &flops);
  for (int h = 0; h < p.n_heads; ++h) {
    auto pq = detail::pooled_queries(p, h, block, &flops);
    const std::vector<double>& keys = pk[size_t(p.kv_head(h))];
    EXPECT_EQ(gpu.block(h).n_qb, g.n_qb) << what;
    for (int r = 0; r < g.n_qb; ++r) {
      const std::vector<int32_t> gr = block_row(gpu, h, r), cr = block_row(cpu, h, r);
      const int nv = g.n_vis[size_t(r)];
      ++a.rows;
      EXPECT_EQ(int(gr.size()), nv == 0 ? 0 : std::min(k + 1, nv)) << what << " r=" << r;
      if (nv > 0) {
        EXPECT_TRUE(std::binary_search(gr.begin(), gr.end(), g.diag[size_t(r)]))
            << what << ": current block missing";
      }
      for (size_t t = 1; t < gr.size(); ++t) EXPECT_LT(gr[t - 1], gr[t]) << what;
      if (gr == cr) continue;
      ++a.rows_differ;
      std::vector<int32_t> cand, gk, ck;
      for (int c = 0; c < nv; ++c)
        if (c != g.diag[size_t(r)]) cand.push_back(c);
      for (int32_t c : gr)
        if (c != g.diag[size_t(r)]) gk.push_back(c);
      for (int32_t c : cr)
        if (c != g.diag[size_t(r)]) ck.push_back(c);
      auto s = [&](int c) {
        return detail::dot(pq.data() + size_t(r) * p.d, keys.data() + size_t(c) * p.d, p.d);
      };
      const double eps = 1e-4 * (1.0 + std::abs(s(ck.empty() ? 0 : ck[0])));
      Boundary b = boundary(cand, gk, s), bc = boundary(cand, ck, s);
      EXPECT_GE(b.margin, -eps) << what << " h=" << h << " r=" << r;
      EXPECT_LE(bc.gap, eps) << what << " h=" << h << " r=" << r << ": differ away from a tie";
      a.worst_margin = std::min(a.worst_margin, b.margin);
      if (testing::Test::HasFailure()) return a;
    }
  }
  return a;
}

// Output over the layout the run selected against the reference (relative 1e-4).
void expect_output_matches_reference(const Variant& v, const Problem& p, const Result& r,
                                     const std::string& what) {
  Result ref = make_reference_backend()->execute(v, p, r.layout, {});
  const double err = relative_error(r.o, ref.o);
  EXPECT_LT(err, 1e-4) << what;
  std::printf("  %s: output rel. error %.2e\n", what.c_str(), err);
}

struct Shape {
  int heads, kv_heads, n_q, n_k, d;
  bool causal, positions;
};

std::string describe(const Shape& s, const std::string& spec) {
  return spec + (s.causal ? " causal" : " bidir") + " H=" + std::to_string(s.heads) + "/" +
         std::to_string(s.kv_heads) + " n_q=" + std::to_string(s.n_q) +
         " n_k=" + std::to_string(s.n_k) + " d=" + std::to_string(s.d) +
         (s.positions ? " positions" : "");
}

Problem make_problem(const Shape& s, uint64_t seed) {
  Problem p = random_problem(s.heads, s.kv_heads, s.n_q, s.n_k, s.d, s.causal, seed);
  if (s.positions) set_random_positions(p, seed + 1);
  return p;
}

// run() on the vulkan backend selects on the GPU; compared with the CPU selector's layout,
// the reference output, and the selection stats.
void check_topk_run(const Shape& s, int k, uint64_t seed) {
  const std::string what = describe(s, "topk(k=" + std::to_string(k) + ")");
  Problem p = make_problem(s, seed);
  Variant v = make_variant("topk(k=" + std::to_string(k) + ")");
  auto gpu = make_backend("vulkan");
  SelectStats gs, cs;
  Layout gl;
  ASSERT_TRUE(gpu->select(v, p, &gl, &gs)) << what << ": the GPU should select top-k";
  Layout cl = v.select(p, &cs);
  Agreement a = expect_topk_agrees(p, k, gl, cl, what);
  EXPECT_EQ(gs.flops, cs.flops) << what;
  EXPECT_GT(gs.seconds, 0.0) << what;
  std::printf(
      "  %s: %lld/%lld rows differ (near-ties), worst margin %.2e, GPU select %.4f s, "
      "CPU select %.4f s\n",
      what.c_str(), (long long)a.rows_differ, (long long)a.rows,
      a.rows_differ ? a.worst_margin : 0.0, gs.seconds, cs.seconds);
  // Near-ties are rare with continuous random scores.
  EXPECT_LE(a.rows_differ * 100, std::max<int64_t>(a.rows, 100)) << what;
  Result r = run(v, p, *gpu);
  EXPECT_EQ(r.stats.backend, "vulkan");
  EXPECT_GT(r.stats.select_seconds, 0.0);
  expect_output_matches_reference(v, p, r, what);
}

void check_block_topk_run(const Shape& s, int block, int k, uint64_t seed) {
  const std::string spec =
      "block_topk(block=" + std::to_string(block) + ",k=" + std::to_string(k) + ")";
  const std::string what = describe(s, spec);
  Problem p = make_problem(s, seed);
  Variant v = make_variant(spec);
  auto gpu = make_backend("vulkan");
  SelectStats gs, cs;
  Layout gl;
  ASSERT_TRUE(gpu->select(v, p, &gl, &gs)) << what << ": the GPU should score the blocks";
  Layout cl = v.select(p, &cs);
  Agreement a = expect_block_topk_agrees(p, block, k, gl, cl, what);
  EXPECT_NEAR(gs.flops, cs.flops, 1e-9 * cs.flops) << what;
  EXPECT_GT(gs.seconds, 0.0) << what;
  std::printf(
      "  %s: %lld/%lld block rows differ (near-ties), GPU select %.4f s, CPU select "
      "%.4f s\n",
      what.c_str(), (long long)a.rows_differ, (long long)a.rows, gs.seconds, cs.seconds);
  Result r = run(v, p, *gpu);
  EXPECT_EQ(r.stats.backend, "vulkan");
  expect_output_matches_reference(v, p, r, what);
}

TEST_F(VulkanSelectorTest, TopkLongRowsCausal) {
  check_topk_run({test::quick() ? 1 : 2, 1, 4099, 4099, 64, true, false}, 64, 1);
}

TEST_F(VulkanSelectorTest, TopkLongRowsBidirectionalNqNeNk) {
  check_topk_run({1, 1, 333, 5001, 48, false, false}, 100, 2);
}

TEST_F(VulkanSelectorTest, TopkGqaOddShapesAndPositions) {
  check_topk_run({4, 2, 77, 301, 40, true, false}, 13, 3);
  check_topk_run({3, 1, 129, 700, 33, true, true}, 33, 4);
  check_topk_run({2, 2, 200, 150, 8, false, true}, 1, 5);
  check_topk_run({1, 1, 1, 1, 7, true, false}, 1, 6);
}

TEST_F(VulkanSelectorTest, TopkKeepsEveryVisibleKeyWhenKIsLarge) {
  check_topk_run({2, 1, 300, 300, 16, true, false}, 5000, 7);
  check_topk_run({1, 1, 64, 90, 16, false, false}, 90, 8);
}

// Exact integer scores: many ties, broken towards the lower key index as on the CPU, so the
// sets must be identical; also over many small chunks of rows (heads split, queries split) and
// with the GPU's workgroup shape (256 invocations) as well as lavapipe's (16).
TEST_F(VulkanSelectorTest, TopkTiesAndChunksMatchExactly) {
  for (const Shape& s :
       {Shape{2, 1, 160, 4500, 16, true, false}, Shape{2, 2, 130, 200, 12, false, true}}) {
    Problem p = make_problem(s, 9);
    make_integer_scores(p, 10);
    for (int k : {1, 7, 64}) {
      Layout cl = make_variant("topk(k=" + std::to_string(k) + ")").select(p);
      for (auto [scratch, wg] : {std::pair<size_t, int>{0, 256},
                                 {size_t(32) * p.n_k * 4, 16},
                                 {size_t(200) * p.n_k * 4, 64},
                                 {0, 8}}) {
        SelectStats st;
        Layout gl = vk::select_topk(*ctx_, p, k, &st, {scratch, wg});
        const std::string what = describe(s, "integer topk k=" + std::to_string(k)) +
                                 " scratch=" + std::to_string(scratch) +
                                 " invocations=" + std::to_string(wg);
        Agreement a = expect_topk_agrees(p, k, gl, cl, what);
        EXPECT_EQ(a.rows_differ, 0) << what << ": exact ties must go to the lower index";
      }
    }
  }
}

// Keys in pairs whose second key is the first one's components reversed, and queries that are
// palindromes: each pair's scores are equal in exact arithmetic but summed in different orders,
// so f32 rounding decides, and the GPU and CPU may order a pair differently; wherever they do,
// the tolerance rule must hold (and exactly min(k, visible) keys are kept).
TEST_F(VulkanSelectorTest, TopkNearTiesStayWithinTolerance) {
  Shape s{1, 1, 200, 4200, 64, true, false};
  Problem p = make_problem(s, 41);
  for (int j = 1; j < p.n_k; j += 2) {
    float* kj = p.k.data() + size_t(j) * p.d;
    std::reverse_copy(kj - p.d, kj, kj);
  }
  for (int i = 0; i < p.n_q; ++i) {
    float* qi = p.q.data() + size_t(i) * p.d;
    for (int t = 0; t < p.d / 2; ++t) qi[p.d - 1 - t] = qi[t];
  }
  Layout cl = make_variant("topk(k=32)").select(p);
  SelectStats st;
  Layout gl = vk::select_topk(*ctx_, p, 32, &st);
  Agreement a = expect_topk_agrees(p, 32, gl, cl, describe(s, "near-tied topk(k=32)"));
  std::printf("  near-tied pairs: %lld/%lld rows differ, worst margin %.2e\n",
              (long long)a.rows_differ, (long long)a.rows, a.rows_differ ? a.worst_margin : 0.0);
}

// run_layers() asks the backend to select too (no sequence state for top-k); a pattern with
// sequence state (sketch_walk) still selects on the CPU and runs.
TEST_F(VulkanSelectorTest, RunLayersSelectsOnTheGpu) {
  auto gpu = make_backend("vulkan");
  std::vector<Problem> layers = {random_problem(2, 1, 90, 90, 16, true, 51),
                                 random_problem(2, 1, 90, 90, 16, true, 52)};
  Variant v = make_variant("topk(k=5)");
  std::vector<Result> rs = run_layers(v, layers, *gpu);
  ASSERT_EQ(rs.size(), 2u);
  for (size_t l = 0; l < rs.size(); ++l) {
    Layout gl;
    SelectStats st;
    ASSERT_TRUE(gpu->select(v, layers[l], &gl, &st));
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(rs[l].layout.index(h).col, gl.index(h).col);
      EXPECT_EQ(rs[l].layout.index(h).row_ptr, gl.index(h).row_ptr);
    }
    expect_output_matches_reference(v, layers[l], rs[l],
                                    "run_layers topk layer " + std::to_string(l));
  }
  Variant sw = make_variant("sketch_walk");
  std::vector<Result> ws = run_layers(sw, layers, *gpu);
  ASSERT_EQ(ws.size(), 2u);
  expect_output_matches_reference(sw, layers[1], ws[1], "run_layers sketch_walk layer 1");
}

TEST_F(VulkanSelectorTest, TopkZeroKAndBadInput) {
  Problem p = random_problem(2, 1, 50, 60, 16, true, 11);
  SelectStats st;
  Layout l = vk::select_topk(*ctx_, p, 0, &st);
  ASSERT_EQ(l.indices.size(), 2u);
  for (const IndexLayout& x : l.indices) {
    EXPECT_EQ(x.nnz(), 0);
    EXPECT_EQ(x.row_ptr.size(), 51u);
  }
  try {
    vk::select_topk(*ctx_, p, -1, &st);
    FAIL() << "k = -1 should throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("k must be >= 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(vk::select_topk(*ctx_, p, 3, &st, {0, 48}), Error);  // not a power of two
  try {
    vk::select_block_topk(*ctx_, p, 0, 2, &st);
    FAIL() << "block = 0 should throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
}

TEST_F(VulkanSelectorTest, BlockTopkLongCausalAndBidirectional) {
  check_block_topk_run({2, 1, 4100, 4100, 64, true, false}, 64, 8, 21);
  check_block_topk_run({1, 1, 4097, 4097, 32, false, false}, 37, 5, 22);
}

TEST_F(VulkanSelectorTest, BlockTopkOddShapesGqaPositionsAndK) {
  check_block_topk_run({4, 2, 300, 1000, 40, true, false}, 7, 3, 23);
  check_block_topk_run({3, 1, 250, 260, 24, true, true}, 16, 2, 24);
  check_block_topk_run({2, 2, 100, 333, 16, false, true}, 10, 0, 25);     // k = 0
  check_block_topk_run({2, 1, 128, 128, 16, true, false}, 16, 1000, 26);  // k >= blocks
  check_block_topk_run({1, 1, 5, 3, 9, false, false}, 64, 2, 27);         // one block
}

// Variants the GPU does not select for fall back to the CPU selector; the fallback backend
// forwards select() to the GPU when it supports the variant.
TEST_F(VulkanSelectorTest, OtherSelectorsStayOnTheCpu) {
  Problem p = random_problem(1, 1, 100, 100, 16, true, 31);
  auto gpu = make_backend("vulkan");
  Layout l;
  SelectStats st;
  EXPECT_FALSE(gpu->select(make_variant("h2o(heavy=8,recent=8)"), p, &l, &st));
  EXPECT_FALSE(gpu->select(make_variant("window(size=8)"), p, &l, &st));
  EXPECT_FALSE(gpu->select(make_variant("dense"), p, &l, &st));
  auto fb = make_backend_with_fallback("vulkan");
  EXPECT_TRUE(fb->select(make_variant("topk(k=4)"), p, &l, &st));
  EXPECT_FALSE(make_backend("cpu")->select(make_variant("topk(k=4)"), p, &l, &st));
}

}  // namespace
#endif  // ATTN_HAVE_VULKAN
