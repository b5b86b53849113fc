// Approximation variants (compute/approximation.h): each fast routine against the f64 routine of
// the same approximation (same seed), independent naive formulas, the limits in which an
// approximation equals dense attention, its implied matrix against its output, and clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/metrics.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "test_util.h"

using namespace attn;
using attn::test::contains;
using attn::test::error_of;

namespace {

Result run_on(const std::string& spec, const Problem& p, const std::string& backend) {
  std::unique_ptr<Backend> b = make_backend(backend);
  return run(make_variant(spec), p, *b);
}

// Problems with odd sizes, grouped-query heads, decode-like n_q < n_k, and both masks.
std::vector<Problem> problems() {
  std::vector<Problem> out;
  uint64_t seed = 11;
  for (bool causal : {true, false})
    for (auto [n_q, n_k, d] : {std::tuple{1, 1, 8}, std::tuple{77, 77, 32}, std::tuple{5, 131, 16},
                               std::tuple{130, 130, 64}})
      out.push_back(random_problem(4, 2, n_q, n_k, d, causal, seed++));
  return out;
}

std::string label(const Problem& p) {
  return std::string(p.causal ? "causal" : "bidir") + " n_q=" + std::to_string(p.n_q) +
         " n_k=" + std::to_string(p.n_k) + " d=" + std::to_string(p.d);
}

// sum_j A_ij v_j from the implied matrix, against O (the matrix must be what ran).
void expect_implied_matches_output(const std::string& spec, const Problem& p, double tol) {
  const Variant v = make_variant(spec);
  std::unique_ptr<Backend> b = make_backend("cpu");
  const Result r = run(v, p, *b);
  std::vector<double> a;
  for (int h = 0; h < p.n_heads; ++h) {
    probability_block(v, p, r, h, 0, p.n_q, 0, p.n_k, a);
    for (int i = 0; i < p.n_q; ++i)
      for (int c = 0; c < p.d; ++c) {
        double o = 0;
        for (int j = 0; j < p.n_k; ++j) o += a[size_t(i) * p.n_k + j] * p.v_row(h, j)[c];
        ASSERT_NEAR(o, r.o_row(h, i)[c], tol)
            << spec << " " << label(p) << " h=" << h << " i=" << i;
      }
  }
}

// Dense-equality limits are checked on the output and on the implied matrix.
void expect_equals_dense(const std::string& spec, const Problem& p, const std::string& backend,
                         double tol) {
  const Result r = run_on(spec, p, backend), ref = run_on("dense", p, backend);
  EXPECT_LT(relative_error(r.o, ref.o), tol) << spec << " " << label(p) << " on " << backend;
}

double naive_kernel_output(const Problem& p, int h, int i, int c,
                           const std::function<double(int, int)>& kernel) {
  double num = 0, den = 0;
  for (int j = 0; j < p.n_k; ++j) {
    if (!p.visible(i, j)) continue;
    const double k = kernel(i, j);
    num += k * p.v_row(h, j)[c];
    den += k;
  }
  return den == 0 ? 0.0 : num / den;
}

// ---- kernel (feature-map) attention -------------------------------------------------------

TEST(Approximations, FeatureMapsFastMatchReference) {
  for (const char* spec : {"linear(feature=elu1)", "linear(feature=relu)", "cosformer",
                           "performer(features=48,seed=3)"})
    for (const Problem& p : problems()) {
      const Result fast = run_on(spec, p, "cpu"), ref = run_on(spec, p, "reference");
      EXPECT_EQ(fast.stats.backend, "cpu");
      EXPECT_EQ(ref.stats.backend, "reference");
      EXPECT_LT(relative_error(fast.o, ref.o), 2e-5) << spec << " " << label(p);
      for (float x : fast.o) ASSERT_TRUE(std::isfinite(x)) << spec;
      EXPECT_GT(fast.stats.counted.flops, 0) << spec;
    }
}

TEST(Approximations, FeatureMapsAgainstNaiveFormulas) {
  for (const Problem& p : problems()) {
    const Result lin = run_on("linear(feature=elu1)", p, "cpu");
    const Result cos = run_on("cosformer", p, "cpu");
    const double m = std::max(p.qpos(p.n_q - 1), p.kpos(p.n_k - 1)) + 1.0;
    auto elu1 = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
    for (int h = 0; h < p.n_heads; ++h)
      for (int i = 0; i < p.n_q; ++i) {
        auto k_lin = [&](int a, int j) {
          double s = 0;
          for (int t = 0; t < p.d; ++t) s += elu1(p.q_row(h, a)[t]) * elu1(p.k_row(h, j)[t]);
          return s;
        };
        auto k_cos = [&](int a, int j) {
          double s = 0;
          for (int t = 0; t < p.d; ++t)
            s += std::max(0.0f, p.q_row(h, a)[t]) * std::max(0.0f, p.k_row(h, j)[t]);
          return s * std::cos(M_PI * (p.qpos(a) - p.kpos(j)) / (2 * m));
        };
        for (int c = 0; c < p.d; c += 3) {
          ASSERT_NEAR(lin.o_row(h, i)[c], naive_kernel_output(p, h, i, c, k_lin), 1e-4) << label(p);
          ASSERT_NEAR(cos.o_row(h, i)[c], naive_kernel_output(p, h, i, c, k_cos), 1e-4) << label(p);
        }
      }
  }
}

TEST(Approximations, FeatureMapsLargeCausal) {
  const int n = test::quick() ? 1024 : 4096;
  const Problem p = random_problem(1, 1, n, n, 64, true, 5);
  for (const char* spec : {"linear(feature=elu1)", "performer(features=64,seed=1)", "cosformer"}) {
    const Result fast = run_on(spec, p, "cpu"), ref = run_on(spec, p, "reference");
    EXPECT_LT(relative_error(fast.o, ref.o), 5e-5) << spec;
    // Work is linear in N: doubling N doubles it (dense would quadruple), and at N = 4096 it is
    // far below the N^2 d of dense attention.
    const Problem half = random_problem(1, 1, n / 2, n / 2, 64, true, 6);
    EXPECT_LT(fast.stats.counted.flops / run_on(spec, half, "cpu").stats.counted.flops, 2.2)
        << spec;
    if (n >= 4096) {
      EXPECT_LT(fast.stats.counted.flops, 0.25 * 2.0 * p.d * double(n) * n) << spec;
    }
  }
}

TEST(Approximations, FeatureMapsImpliedMatrixIsWhatRan) {
  for (const char* spec : {"linear(feature=elu1)", "cosformer", "performer(features=32,seed=2)"})
    for (const Problem& p : problems()) expect_implied_matches_output(spec, p, 2e-4);
}

TEST(Approximations, PerformerErrorFallsLikeInverseSqrtFeatures) {
  // Relative error of the output against exact softmax, averaged over seeds, at 16..1024
  // features; the fitted log-log slope must be near -1/2. Small scores (qk_std 0.5): FAVOR+'s
  // variance grows like exp(|q + k|^2 scale), so large ones need far more features.
  const Problem p = random_problem(2, 2, 96, 96, 16, false, 21, 0.5f);
  const Result dense = run_on("dense", p, "cpu");
  std::vector<double> lx, ly;
  for (int f : {16, 64, 256, 1024}) {
    double err = 0;
    const int seeds = 8;
    for (int s = 0; s < seeds; ++s)
      err += relative_error(
          run_on("performer(features=" + std::to_string(f) + ",seed=" + std::to_string(s) + ")", p,
                 "cpu")
              .o,
          dense.o);
    lx.push_back(std::log(double(f)));
    ly.push_back(std::log(err / seeds));
  }
  const double mx = std::accumulate(lx.begin(), lx.end(), 0.0) / lx.size();
  const double my = std::accumulate(ly.begin(), ly.end(), 0.0) / ly.size();
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < lx.size(); ++i) {
    sxy += (lx[i] - mx) * (ly[i] - my);
    sxx += (lx[i] - mx) * (lx[i] - mx);
  }
  const double slope = sxy / sxx;
  EXPECT_GE(slope, -0.7);
  EXPECT_LE(slope, -0.3);
}

TEST(Approximations, FeatureMapsServeTilesAndMetrics) {
  const Problem p = random_problem(2, 1, 200, 200, 32, true, 8);
  const Variant v = make_variant("linear(feature=elu1)");
  std::unique_ptr<Backend> b = make_backend("cpu");
  const Result r = run(v, p, *b), ref = run(make_variant("dense"), p, *b);
  const Metrics m = compare(v, p, r, ref);
  EXPECT_NEAR(m.rel_error, relative_error(r.o, ref.o), 1e-12);
  EXPECT_NEAR(m.mass_recall, 1.0, 1e-6);  // every key contributes
  EXPECT_TRUE(std::isfinite(m.row_kl) && m.row_kl > 0);
  EXPECT_DOUBLE_EQ(m.density, 1.0);
  // A pooled tile equals the pooled implied block.
  TileRequest t{1, 10, 110, 0, 200, 20, 10, Pool::Max};
  const Tile tile = tile_probabilities(v, p, r, t);
  std::vector<double> a;
  probability_block(v, p, r, 1, 10, 110, 0, 200, a);
  for (int y = 0; y < tile.h; ++y)
    for (int x = 0; x < tile.w; ++x) {
      double best = 0;
      for (int i = y * 10; i < (y + 1) * 10; ++i)
        for (int j = x * 10; j < (x + 1) * 10; ++j) best = std::max(best, a[size_t(i) * 200 + j]);
      ASSERT_NEAR(tile.cells[size_t(y) * tile.w + x], best, 1e-6);
    }
  // Per-head metrics go through head_result, which keeps the state of that head.
  const Metrics m1 = compare(v, head_problem(p, 1), head_result(r, p, 1), head_result(ref, p, 1));
  EXPECT_TRUE(std::isfinite(m1.row_kl));
}

// ---- Nystrom -----------------------------------------------------------------------------------

TEST(Approximations, NystromFastMatchesReference) {
  for (const char* spec :
       {"nystrom(landmarks=8)", "nystrom(landmarks=16,pinv=iterative)", "nystrom(landmarks=300)"})
    for (const Problem& p : problems()) {
      if (p.causal) continue;
      const Result fast = run_on(spec, p, "cpu"), ref = run_on(spec, p, "reference");
      EXPECT_LT(relative_error(fast.o, ref.o), 1e-3) << spec << " " << label(p);
    }
}

TEST(Approximations, NystromWithEveryLandmarkIsDense) {
  for (int n : {7, 64, 97}) {
    const Problem p = random_problem(2, 1, n, n, 16, false, uint64_t(n));
    const std::string spec = "nystrom(landmarks=" + std::to_string(n) + ",pinv=exact)";
    expect_equals_dense(spec, p, "reference", 1e-8);
    expect_equals_dense(spec, p, "cpu", 1e-3);
  }
  // The iterative pseudo-inverse approaches it too, and more landmarks help.
  const Problem p = random_problem(1, 1, 256, 256, 32, false, 3);
  const Result dense = run_on("dense", p, "reference");
  const double e8 = relative_error(run_on("nystrom(landmarks=8)", p, "cpu").o, dense.o);
  const double e64 = relative_error(run_on("nystrom(landmarks=64)", p, "cpu").o, dense.o);
  const double e64i =
      relative_error(run_on("nystrom(landmarks=64,pinv=iterative)", p, "cpu").o, dense.o);
  EXPECT_LT(e64, e8);
  EXPECT_LT(e64i, 1.0);
}

TEST(Approximations, NystromLargeAndImplied) {
  const int n = test::quick() ? 1024 : 4096;
  const Problem big = random_problem(1, 1, n, n, 64, false, 9);
  const Result fast = run_on("nystrom(landmarks=64)", big, "cpu");
  const Result ref = run_on("nystrom(landmarks=64)", big, "reference");
  EXPECT_LT(relative_error(fast.o, ref.o), 1e-3);
  for (const Problem& p : problems())
    if (!p.causal) expect_implied_matches_output("nystrom(landmarks=8)", p, 1e-3);
}

TEST(Approximations, LinformerFastMatchesReferenceAndImplied) {
  for (const Problem& p : problems()) {
    if (p.causal) continue;
    for (const char* spec : {"linformer(k=8,seed=2)", "linformer(k=200)"}) {
      const Result fast = run_on(spec, p, "cpu"), ref = run_on(spec, p, "reference");
      EXPECT_LT(relative_error(fast.o, ref.o), 1e-4) << spec << " " << label(p);
      expect_implied_matches_output(spec, p, 1e-3);
    }
  }
  // k beyond the number of keys is clamped to it (more rows add no rank): the same output as
  // k = n_k, and k = 65536 over 40 keys costs no more than that.
  const Problem small = random_problem(2, 1, 40, 40, 8, false, 9);
  const Result at_n = run_on("linformer(k=40,seed=5)", small, "cpu");
  for (const char* spec : {"linformer(k=41,seed=5)", "linformer(k=65536,seed=5)"}) {
    const Result big = run_on(spec, small, "cpu");
    EXPECT_EQ(big.o, at_n.o) << spec;
    EXPECT_DOUBLE_EQ(big.stats.counted.flops, at_n.stats.counted.flops) << spec;
  }
  const Problem causal = random_problem(1, 1, 16, 16, 8, true, 1);
  const std::string m =
      error_of([&] { run_on("linformer", causal, "cpu"); }, ErrorCode::Unsupported);
  EXPECT_TRUE(contains(m, "causal") && contains(m, "linformer")) << m;
}

TEST(Approximations, NystromRefusesCausalProblems) {
  const Problem p = random_problem(1, 1, 16, 16, 8, true, 1);
  const std::string m =
      error_of([&] { run_on("nystrom(landmarks=4)", p, "cpu"); }, ErrorCode::Unsupported);
  EXPECT_TRUE(contains(m, "causal") && contains(m, "nystrom")) << m;
  const std::string e =
      error_of([] { make_variant("nystrom(pinv=svd)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(e, "exact") && contains(e, "iterative")) << e;
}

// ---- quantised QK ------------------------------------------------------------------------------

TEST(Approximations, QuantisedQkFastMatchesReference) {
  for (const char* spec :
       {"quant_qk(bits=8)", "quant_qk(bits=4,smooth=false,block=16)", "fp8_qk(format=e4m3)",
        "fp8_qk(format=e5m2)", "window(size=16)+quant_qk(bits=8)", "topk(k=8)+sigmoid+fp8_qk"})
    for (const Problem& p : problems()) {
      const Result fast = run_on(spec, p, "cpu"), ref = run_on(spec, p, "reference");
      EXPECT_LT(relative_error(fast.o, ref.o), 1e-5) << spec << " " << label(p);
      expect_implied_matches_output(spec, p, 1e-4);
    }
}

TEST(Approximations, QuantisedQkWithinItsBound) {
  // Every score of the rounded problem is within the rounding bound of the exact score:
  // |q'.k' - q.k| <= sum_c |q'_c - q_c| |k'_c| + |q_c| |k'_c - k_c|, with each rounded value
  // within half a step, max|x| / (2^(b-1) - 1) of its block.
  const Problem p = random_problem(2, 1, 200, 200, 32, true, 4);
  const Result dense = run_on("dense", p, "cpu");
  double e8 = 0, e4 = 0;
  for (int bits : {8, 4}) {
    const Variant v = make_variant("quant_qk(bits=" + std::to_string(bits) + ",smooth=false)");
    std::unique_ptr<Backend> b = make_backend("cpu");
    const Result r = run(v, p, *b);
    (bits == 8 ? e8 : e4) = relative_error(r.o, dense.o);
    // Rebuild the rounded rows from the definition and compare with the block's step.
    const float top = float((1 << (bits - 1)) - 1);
    auto step = [&](const float* x, int n, int i) {
      const int b0 = i / 64 * 64, b1 = std::min(b0 + 64, n);
      float amax = 0;
      for (int a = b0; a < b1; ++a)
        for (int c = 0; c < p.d; ++c) amax = std::max(amax, std::abs(x[size_t(a) * p.d + c]));
      return amax / top;
    };
    std::vector<double> implied;
    probability_block(v, p, r, 0, 0, p.n_q, 0, p.n_k, implied);
    for (int i = 0; i < p.n_q; i += 7) {
      const double sq = step(p.q_row(0, 0), p.n_q, i);
      auto bound = [&](int j) {
        const double sk = step(p.k_row(0, 0), p.n_k, j);
        double b = 0;
        for (int c = 0; c < p.d; ++c)
          b += sq / 2 * (std::abs(p.k_row(0, j)[c]) + sk / 2) + std::abs(p.q_row(0, i)[c]) * sk / 2;
        return b * p.effective_scale();
      };
      for (int j = 0; j <= i; j += 5) {
        // Scores from probabilities: log a_ij - log a_ii = s'_ij - s'_ii.
        double exact_ij = 0, exact_ii = 0;
        for (int c = 0; c < p.d; ++c) {
          exact_ij += double(p.q_row(0, i)[c]) * p.k_row(0, j)[c];
          exact_ii += double(p.q_row(0, i)[c]) * p.k_row(0, i)[c];
        }
        const double s_diff =
            std::log(implied[size_t(i) * p.n_k + j]) - std::log(implied[size_t(i) * p.n_k + i]);
        EXPECT_LE(std::abs(s_diff - p.effective_scale() * (exact_ij - exact_ii)),
                  bound(j) + bound(i) + 1e-5)
            << "bits=" << bits << " i=" << i << " j=" << j;
      }
    }
  }
  EXPECT_LT(e8, 0.02);
  EXPECT_LT(e8, e4);
  // FP8: e4m3 has more mantissa than e5m2.
  const double f43 = relative_error(run_on("fp8_qk(format=e4m3)", p, "cpu").o, dense.o);
  const double f52 = relative_error(run_on("fp8_qk(format=e5m2)", p, "cpu").o, dense.o);
  EXPECT_LT(f43, f52);
  EXPECT_LT(f43, 0.05);
}

TEST(Approximations, KeySmoothingHelpsOffsetKeys) {
  // Keys with a large shared offset: smoothing removes it before rounding.
  Problem p = random_problem(1, 1, 128, 128, 32, false, 6);
  for (size_t i = 0; i < p.k.size(); ++i) p.k[i] += (i % 32 < 8) ? 20.0f : 0.0f;
  const Result dense = run_on("dense", p, "cpu");
  const double plain = relative_error(run_on("quant_qk(bits=4,smooth=false)", p, "cpu").o, dense.o);
  const double smooth = relative_error(run_on("quant_qk(bits=4,smooth=true)", p, "cpu").o, dense.o);
  EXPECT_LT(smooth, 0.5 * plain);
}

// ---- vector-quantised keys
// -----------------------------------------------------------------------

TEST(Approximations, VqWithACodewordPerKeyIsDense) {
  for (const Problem& p : problems()) {
    const std::string spec = "vq(codebook=" + std::to_string(p.n_k) + ")";
    expect_equals_dense(spec, p, "cpu", 1e-6);
    expect_equals_dense(spec, p, "reference", 1e-9);
  }
}

TEST(Approximations, VqFastMatchesReferenceAndImplied) {
  for (const char* spec : {"vq(codebook=8,iters=3,seed=1)", "window(size=16)+vq(codebook=4)"})
    for (const Problem& p : problems()) {
      const Result fast = run_on(spec, p, "cpu"), ref = run_on(spec, p, "reference");
      EXPECT_LT(relative_error(fast.o, ref.o), 1e-5) << spec << " " << label(p);
      expect_implied_matches_output(spec, p, 1e-4);
    }
  // Larger codebooks approximate better (keys around 8 centres).
  Problem p = random_problem(1, 1, 256, 256, 16, false, 5, 0.2f);
  for (int j = 0; j < 256; ++j) p.k[size_t(j) * 16 + size_t(j % 8)] += 3.0f;
  const Result dense = run_on("dense", p, "cpu");
  const double e2 = relative_error(run_on("vq(codebook=2,iters=8)", p, "cpu").o, dense.o);
  const double e8 = relative_error(run_on("vq(codebook=8,iters=8)", p, "cpu").o, dense.o);
  const double e64 = relative_error(run_on("vq(codebook=64,iters=8)", p, "cpu").o, dense.o);
  EXPECT_LT(e8, e2);
  EXPECT_LT(e64, e8);
}

// ---- delta correction
// ----------------------------------------------------------------------------

TEST(Approximations, DeltaStrideOneIsDense) {
  for (const Problem& p : problems()) {
    expect_equals_dense("sinks_window(sinks=2,window=8)+delta(stride=1)", p, "cpu", 1e-5);
    expect_equals_dense("topk(k=4)+delta(stride=1)", p, "reference", 1e-6);
  }
}

TEST(Approximations, DeltaFastMatchesReferenceAndImplied) {
  for (const char* spec : {"sinks_window(sinks=2,window=8)+delta(stride=4)",
                           "block_topk(block=16,k=1)+delta(stride=3)",
                           "window(size=8)+softcap(cap=5)+delta(stride=7)"})
    for (const Problem& p : problems()) {
      const Result fast = run_on(spec, p, "cpu"), ref = run_on(spec, p, "reference");
      EXPECT_LT(relative_error(fast.o, ref.o), 1e-5) << spec << " " << label(p);
      expect_implied_matches_output(spec, p, 1e-4);
      // Kept entries: the pattern's plus each anchor query's visible keys.
      const Variant v = make_variant(spec);
      std::unique_ptr<Backend> b = make_backend("cpu");
      const Result sparse = run(v.exact_part(), p, *b);
      std::vector<int32_t> keys, sk;
      for (int i = 0; i < p.n_q; ++i) {
        layout_row_keys(fast.layout, p, 1, i, keys);
        layout_row_keys(sparse.layout, p, 1, i, sk);
        const int stride = spec[std::string(spec).size() - 2] - '0';
        if (i % stride == 0) {
          int vis = 0;
          for (int j = 0; j < p.n_k; ++j) vis += p.visible(i, j);
          ASSERT_EQ(int(keys.size()), vis) << spec;
        } else {
          ASSERT_EQ(keys, sk) << spec;
        }
      }
    }
}

TEST(Approximations, DeltaRecoversMostOfTheLossOnLongInputs) {
  // Queries that change slowly along the sequence (as in real models; independent random queries
  // would make every anchor's correction noise for its neighbours).
  const int n = test::quick() ? 1024 : 4096;
  Problem p = random_problem(2, 2, n, n, 64, true, 13, 1.5f);
  for (int h = 0; h < p.n_heads; ++h)
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < p.d; ++c) {
        float& x = p.q[(size_t(h) * n + i) * p.d + c];
        x = p.q[size_t(h) * n * p.d + c] + 0.1f * x;  // row 0 plus a little of its own
      }
  const Result dense = run_on("dense", p, "cpu");
  const double sparse =
      relative_error(run_on("sinks_window(sinks=4,window=64)", p, "cpu").o, dense.o);
  const Result corrected = run_on("sinks_window(sinks=4,window=64)+delta(stride=16)", p, "cpu");
  const double fixed = relative_error(corrected.o, dense.o);
  EXPECT_LT(fixed, 0.5 * sparse) << "sparse " << sparse << ", corrected " << fixed;
  // A 68-key window and every 16th query's full row: under 10% of the entries at N = 4096,
  // under 20% at the quick suite's 1024.
  EXPECT_LT(corrected.stats.density, n >= 4096 ? 0.1 : 0.2);
}

TEST(Approximations, BadSpecsGiveClearErrors) {
  std::string m = error_of([] { make_variant("linear(feature=gelu)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "elu1") && contains(m, "relu")) << m;
  m = error_of([] { make_variant("performer(features=0)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "features") && contains(m, "[1, 4096]")) << m;
  m = error_of([] { make_variant("window(size=8)+linear"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "stands alone") && contains(m, "window")) << m;
  m = error_of([] { make_variant("cosformer+sigmoid"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "sigmoid")) << m;
  m = error_of([] { make_variant("linear+performer"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "two approximations")) << m;
  m = error_of([] { make_variant("quant_qk(bits=16)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "bits") && contains(m, "[2, 8]")) << m;
  m = error_of([] { make_variant("fp8_qk(format=e3m4)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "e4m3") && contains(m, "e5m2")) << m;
  m = error_of([] { make_variant("delta(stride=0)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "stride")) << m;
  m = error_of([] { make_variant("window(size=4)+selective+delta"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "selective")) << m;
  EXPECT_EQ(make_variant("delta(stride=8)+sinks_window(sinks=4,window=64)").spec(),
            "sinks_window(sinks=4,window=64)+delta(stride=8)");
  EXPECT_EQ(make_variant("linear").spec(), "linear(feature=elu1)");
  EXPECT_EQ(make_variant("performer(seed=4)").spec(), "performer(features=64,seed=4)");
}

}  // namespace
