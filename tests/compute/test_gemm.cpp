// cpu::sgemm (the model layers' GEMM) against a double-precision reference: odd sizes around
// the 12 x 32 register tile and the 256-deep k blocks, both weight layouts, bias or none,
// strided operands, several thread counts. Skipped where the CPU has no AVX-512 (sgemm then
// declines and the layers use Eigen, which test_models covers).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "compute/cpu/gemm.h"

namespace {

using attn::cpu::GemmArgs;

struct Case {
  int m, n, k;
};

// max |C - ref| / (sum_p |a||b| + 1) over C: the error a float dot product of k terms may have.
double scaled_error(const GemmArgs& g, const std::vector<float>& c) {
  double worst = 0;
  for (int i = 0; i < g.m; ++i) {
    for (int j = 0; j < g.n; ++j) {
      double ref = g.bias ? g.bias[j] : 0.0, mag = 1.0;
      for (int p = 0; p < g.k; ++p) {
        const double a = g.a[size_t(i) * g.lda + p];
        const double b = g.b_nk ? g.b[size_t(j) * g.ldb + p] : g.b[size_t(p) * g.ldb + j];
        ref += a * b;
        mag += std::fabs(a * b);
      }
      worst = std::max(worst, std::fabs(ref - c[size_t(i) * g.ldc + j]) / mag);
    }
  }
  return worst;
}

TEST(Gemm, MatchesReferenceOnOddShapes) {
  if (!*attn::cpu::sgemm_isa()) GTEST_SKIP() << "no AVX-512 on this CPU: layers use Eigen";
  const Case cases[] = {{1, 1, 1},      {1, 50, 7},    {7, 33, 5},     {11, 31, 255},
                        {12, 32, 256},  {13, 65, 257}, {25, 97, 513},  {100, 50, 3072},
                        {3, 2304, 768}, {129, 1, 64},  {61, 130, 1000}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Case& cs : cases) {
    for (int b_nk = 0; b_nk < 2; ++b_nk) {
      for (int with_bias = 0; with_bias < 2; ++with_bias) {
        for (int threads : {1, 2, 3}) {
          // Leading dimensions larger than the rows, so strides are exercised.
          const int lda = cs.k + 3, ldb = (b_nk ? cs.k : cs.n) + 5, ldc = cs.n + 2;
          std::vector<float> a(size_t(cs.m) * lda), b(size_t(b_nk ? cs.n : cs.k) * ldb);
          std::vector<float> bias(size_t(cs.n)), c(size_t(cs.m) * ldc, 1e30f);
          for (float& x : a) x = u(rng);
          for (float& x : b) x = u(rng);
          for (float& x : bias) x = u(rng);
          GemmArgs g;
          g.m = cs.m;
          g.n = cs.n;
          g.k = cs.k;
          g.a = a.data();
          g.lda = lda;
          g.b = b.data();
          g.ldb = ldb;
          g.b_nk = b_nk;
          g.bias = with_bias ? bias.data() : nullptr;
          g.c = c.data();
          g.ldc = ldc;
          ASSERT_TRUE(attn::cpu::sgemm(g, threads));
          EXPECT_LT(scaled_error(g, c), 2e-6)
              << cs.m << "x" << cs.n << "x" << cs.k << " b_nk " << b_nk << " bias " << with_bias
              << " threads " << threads;
          // Padding columns between rows of C are left alone.
          for (int i = 0; i < cs.m; ++i) {
            EXPECT_EQ(c[size_t(i) * ldc + cs.n], 1e30f);
            EXPECT_EQ(c[size_t(i) * ldc + cs.n + 1], 1e30f);
          }
        }
      }
    }
  }
}

TEST(Gemm, EmptyInnerDimensionGivesBias) {
  if (!*attn::cpu::sgemm_isa()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> bias = {1.5f, -2.0f, 3.0f}, c(6, 9.0f);
  GemmArgs g;
  g.m = 2;
  g.n = 3;
  g.k = 0;
  g.bias = bias.data();
  g.c = c.data();
  g.ldc = 3;
  ASSERT_TRUE(attn::cpu::sgemm(g, 0));
  EXPECT_EQ(c, (std::vector<float>{1.5f, -2.0f, 3.0f, 1.5f, -2.0f, 3.0f}));
}

}  // namespace
