// cpu::sgemm (the model layers' GEMM) against a double-precision reference: odd sizes around
// the 12 x 32 register tile and the 256-deep k blocks, both weight layouts, bias or none,
// strided operands, several thread counts. Skipped where the CPU has no AVX-512 (sgemm then
// declines and the layers use Eigen, which test_models covers).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu/gemm.h"
#include "compute/kv/kv_precision.h"

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
        const auto* B = static_cast<const float*>(g.b);
        const double b = g.b_nk ? B[size_t(j) * g.ldb + p] : B[size_t(p) * g.ldb + j];
        ref += a * b;
        mag += std::fabs(a * b);
      }
      worst = std::max(worst, std::fabs(ref - c[size_t(i) * g.ldc + j]) / mag);
    }
  }
  return worst;
}

// C = A B (+ bias) over the given buffers and strides.
GemmArgs args(const Case& cs, const float* a, int lda, const void* b, attn::cpu::ElemType bt,
              int ldb, bool b_nk, const float* bias, float* c, int ldc) {
  GemmArgs g;
  g.m = cs.m;
  g.n = cs.n;
  g.k = cs.k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.b_type = bt;
  g.ldb = ldb;
  g.b_nk = b_nk;
  g.bias = bias;
  g.c = c;
  g.ldc = ldc;
  return g;
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
          const GemmArgs g = args(cs, a.data(), lda, b.data(), attn::cpu::ElemType::F32, ldb, b_nk,
                                  with_bias ? bias.data() : nullptr, c.data(), ldc);
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

// 16-bit weights, on every path this CPU has (ATTNSCOPE_GEMM forces each): the widening paths
// must give the f32 product of the stored values, the bf16 paths (amx, dpbf16) the product of A
// rounded to bf16 (round to nearest even) with B, summed in f32. A kernel that rounded A by
// truncation, or not at all, misses that reference by ~2^-9 relative, far above the tolerance.
class Gemm16 : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { setenv("ATTNSCOPE_GEMM", GetParam(), 1); }
  void TearDown() override { unsetenv("ATTNSCOPE_GEMM"); }
};

uint16_t f16_bits(float x) {
  return uint16_t(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

// The paths that multiply bf16 B with A rounded to bf16.
bool rounds_a(const std::string& path) {
  return path == "amx" || path == "dpbf16";
}

TEST_P(Gemm16, MatchesReferenceForBf16AndF16Weights) {
  using attn::cpu::ElemType;
  const std::string want = GetParam();
  // Odd k (a zero-padded last pair), a last k block of one (513), m = 1, n not a multiple of
  // 32, m past one A block (200), n past one B block (2304, one thread).
  const Case cases[] = {{8, 1, 1},     {9, 33, 7},     {31, 31, 31},    {32, 32, 32},
                        {33, 65, 513}, {64, 64, 1024}, {100, 50, 3072}, {47, 130, 1000},
                        {8, 2304, 96}, {129, 1, 64},   {1, 33, 7},      {1, 70, 1001},
                        {200, 70, 33}, {13, 100, 2}};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int ran = 0;
  for (ElemType t : {ElemType::Bf16, ElemType::F16}) {
    const std::string path = attn::cpu::gemm_path(t);
    if (path != want) continue;  // this CPU lacks the forced path (or AMX, which is bf16 only)
    ++ran;
    const bool rounded = rounds_a(path);
    for (const Case& cs : cases) {
      for (int b_nk = 0; b_nk < 2; ++b_nk) {
        for (int threads : {1, 2}) {
          const bool with_bias = (cs.m + b_nk + threads) % 2 == 0;  // both, across the cases
          const int lda = cs.k + 1, ldb = (b_nk ? cs.k : cs.n) + 3, ldc = cs.n + 2;
          std::vector<float> a(size_t(cs.m) * lda), bias(size_t(cs.n));
          std::vector<float> bw(size_t(b_nk ? cs.n : cs.k) * ldb);  // B's values, as f32
          std::vector<uint16_t> b16(bw.size());
          for (float& x : a) x = u(rng);
          for (float& x : bias) x = u(rng);
          for (size_t i = 0; i < bw.size(); ++i) {
            const float x = u(rng);
            b16[i] = t == ElemType::Bf16 ? attn::cpu::bf16_bits(x) : f16_bits(x);
            attn::cpu::widen(t, &b16[i], 1, &bw[i]);
          }
          std::vector<float> c(size_t(cs.m) * ldc, 1e30f);
          const GemmArgs g = args(cs, a.data(), lda, b16.data(), t, ldb, b_nk,
                                  with_bias ? bias.data() : nullptr, c.data(), ldc);
          ASSERT_TRUE(attn::cpu::sgemm(g, threads));
          // The reference: the same product over f32 B (and A rounded as the bf16 paths round it).
          std::vector<float> ar = a;
          if (rounded)
            for (float& x : ar) x = attn::round_bf16(x);
          GemmArgs ref = g;
          ref.a = ar.data();
          ref.b = bw.data();
          ref.b_type = ElemType::F32;
          EXPECT_LT(scaled_error(ref, c), 2e-6)
              << path << " " << attn::cpu::elem_type_name(t) << " " << cs.m << "x" << cs.n << "x"
              << cs.k << " b_nk " << b_nk << " bias " << with_bias << " threads " << threads;
          for (int i = 0; i < cs.m; ++i) EXPECT_EQ(c[size_t(i) * ldc + cs.n], 1e30f);
        }
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "this CPU has no " << want << " path";
}

// The bf16 paths round A to nearest even, ties to the even mantissa, in the vector conversion
// and in the ragged rest of a row alike: A holds exact ties (1 + 2^-8 -> 1, 1 + 3 * 2^-8 ->
// 1 + 2^-6), B small integers, so every product and sum is exact in f32 and C must equal the
// reference bit for bit. Truncating A, or rounding ties away from zero, changes C.
TEST_P(Gemm16, Bf16PathsRoundATiesToEven) {
  using attn::cpu::ElemType;
  const std::string want = GetParam();
  if (!rounds_a(want)) GTEST_SKIP() << want << " widens B exactly: A is not rounded";
  if (attn::cpu::gemm_path(ElemType::Bf16) != want)
    GTEST_SKIP() << "this CPU has no " << want << " path";
  const float values[] = {1.00390625f, 1.01171875f, -1.00390625f, -1.01171875f,
                          1.5f,        0.75f,       3.0078125f,   -2.0f};
  std::mt19937 rng(14);
  for (const Case& cs : {Case{13, 33, 37}, Case{1, 40, 7}, Case{25, 64, 70}}) {
    for (int b_nk = 0; b_nk < 2; ++b_nk) {
      std::vector<float> a(size_t(cs.m) * cs.k), ar(a.size()), bw(size_t(cs.n) * cs.k);
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = values[rng() % 8];
        ar[i] = attn::round_bf16(a[i]);
      }
      std::vector<uint16_t> b16(bw.size());
      for (size_t i = 0; i < bw.size(); ++i) {
        bw[i] = float(int(rng() % 5) - 2);
        b16[i] = attn::cpu::bf16_bits(bw[i]);
      }
      const int ldb = b_nk ? cs.k : cs.n;
      std::vector<float> c(size_t(cs.m) * cs.n);
      const GemmArgs g =
          args(cs, a.data(), cs.k, b16.data(), ElemType::Bf16, ldb, b_nk, nullptr, c.data(), cs.n);
      ASSERT_TRUE(attn::cpu::sgemm(g, 1));
      for (int i = 0; i < cs.m; ++i)
        for (int j = 0; j < cs.n; ++j) {
          double ref = 0;
          for (int p = 0; p < cs.k; ++p)
            ref += double(ar[size_t(i) * cs.k + p]) *
                   bw[b_nk ? size_t(j) * cs.k + p : size_t(p) * cs.n + j];
          ASSERT_EQ(c[size_t(i) * cs.n + j], float(ref))
              << want << " " << cs.m << "x" << cs.n << "x" << cs.k << " b_nk " << b_nk << " at "
              << i << "," << j;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Gemm16, ::testing::Values("amx", "dpbf16", "avx512", "eigen"));

// round_bf16 (bf16 matmul precision), f32 and bf16 weights, on every path: C must be the product
// of A and B both rounded to bf16 (nearest even), summed in f32. The reference rounds both in
// double; a kernel that left f32 B unrounded (or truncated it) misses by ~2^-9 relative.
TEST_P(Gemm16, RoundBf16MultipliesRoundedOperands) {
  using attn::cpu::ElemType;
  const std::string want = GetParam();
  if (attn::cpu::gemm_path(ElemType::F32, true) != want)
    GTEST_SKIP() << "this CPU has no " << want << " path";
  const Case cases[] = {{8, 1, 1},       {9, 33, 7},      {32, 32, 32},  {33, 65, 513},
                        {100, 50, 3072}, {47, 130, 1000}, {256, 96, 64}, {1, 45, 77}};
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (ElemType t : {ElemType::F32, ElemType::Bf16}) {
    for (const Case& cs : cases) {
      for (int b_nk = 0; b_nk < 2; ++b_nk) {
        for (int threads : {1, 2}) {
          const int lda = cs.k + 1, ldb = (b_nk ? cs.k : cs.n) + 3, ldc = cs.n + 2;
          std::vector<float> a(size_t(cs.m) * lda), bias(size_t(cs.n));
          std::vector<float> bw(size_t(b_nk ? cs.n : cs.k) * ldb), br(bw.size());
          std::vector<uint16_t> b16(bw.size());
          for (float& x : a) x = u(rng);
          for (float& x : bias) x = u(rng);
          for (size_t i = 0; i < bw.size(); ++i) {
            bw[i] = u(rng);
            b16[i] = attn::cpu::bf16_bits(bw[i]);
            br[i] = attn::round_bf16(bw[i]);
          }
          std::vector<float> c(size_t(cs.m) * ldc, 1e30f);
          GemmArgs g = args(cs, a.data(), lda,
                            t == ElemType::F32 ? static_cast<const void*>(bw.data()) : b16.data(),
                            t, ldb, b_nk, bias.data(), c.data(), ldc);
          g.round_bf16 = true;
          ASSERT_TRUE(attn::cpu::sgemm(g, threads));
          std::vector<float> ar = a;
          for (float& x : ar) x = attn::round_bf16(x);
          GemmArgs ref = g;
          ref.a = ar.data();
          ref.b = br.data();
          ref.b_type = ElemType::F32;
          EXPECT_LT(scaled_error(ref, c), 2e-6)
              << want << " " << attn::cpu::elem_type_name(t) << " " << cs.m << "x" << cs.n << "x"
              << cs.k << " b_nk " << b_nk << " threads " << threads;
          for (int i = 0; i < cs.m; ++i) EXPECT_EQ(c[size_t(i) * ldc + cs.n], 1e30f);
        }
      }
    }
  }
}

// GemmPackScope (amx and dpbf16 paths): a weight B packed once and reused gives the very bits a
// per-call packing gives, for both layouts, f32 (round_bf16) and bf16 B, any thread split; B
// past the budget is packed per call; the scope keeps what it packed and restores the enclosing
// scope on exit.
TEST(GemmPack, ReusedPanelsGiveTheSameBits) {
  using attn::cpu::ElemType;
  const std::string path = attn::cpu::gemm_path(ElemType::Bf16);
  if (path != "amx" && path != "dpbf16")
    GTEST_SKIP() << "no AMX or AVX512-BF16 on this CPU: the scope does nothing";
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const Case cases[] = {{256, 768, 768}, {40, 130, 1000}, {300, 2304, 96}, {33, 65, 513}};
  for (const Case& cs : cases) {
    for (ElemType t : {ElemType::F32, ElemType::Bf16}) {
      for (int b_nk = 0; b_nk < 2; ++b_nk) {
        const int ldb = b_nk ? cs.k : cs.n;
        std::vector<float> a(size_t(cs.m) * cs.k), bw(size_t(b_nk ? cs.n : cs.k) * ldb);
        for (float& x : a) x = u(rng);
        for (float& x : bw) x = u(rng);
        std::vector<uint16_t> b16(bw.size());
        for (size_t i = 0; i < bw.size(); ++i) b16[i] = attn::cpu::bf16_bits(bw[i]);
        const void* b = t == ElemType::F32 ? static_cast<const void*>(bw.data()) : b16.data();
        std::vector<float> plain(size_t(cs.m) * cs.n), c(plain.size());
        GemmArgs g = args(cs, a.data(), cs.k, b, t, ldb, b_nk, nullptr, plain.data(), cs.n);
        g.round_bf16 = true;
        g.b_weights = true;
        ASSERT_TRUE(attn::cpu::sgemm(g, 2));
        g.c = c.data();
        const size_t bf16_bytes = size_t(cs.n) * cs.k * 2;
        {
          attn::cpu::GemmPackScope scope(size_t(1) << 30);
          for (int threads : {2, 1, 2}) {
            std::fill(c.begin(), c.end(), 0.0f);
            ASSERT_TRUE(attn::cpu::sgemm(g, threads));
            EXPECT_EQ(c, plain) << cs.m << "x" << cs.n << "x" << cs.k << " b_nk " << b_nk;
            EXPECT_GE(scope.bytes(), bf16_bytes);  // packed once, kept
            EXPECT_LT(scope.bytes(), bf16_bytes * 2);
          }
          // The kept panels are what the products read: B changed in place (against the
          // scope's contract, to see it) still gives the first product.
          for (float& x : bw) x = -x;
          for (uint16_t& x : b16) x ^= 0x8000;
          std::fill(c.begin(), c.end(), 0.0f);
          ASSERT_TRUE(attn::cpu::sgemm(g, 2));
          EXPECT_EQ(c, plain);
          for (float& x : bw) x = -x;
          for (uint16_t& x : b16) x ^= 0x8000;
          attn::cpu::GemmPackScope small(bf16_bytes / 2);  // too small: per call
          std::fill(c.begin(), c.end(), 0.0f);
          ASSERT_TRUE(attn::cpu::sgemm(g, 2));
          EXPECT_EQ(c, plain);
          EXPECT_EQ(small.bytes(), 0u);
        }
        // B not marked as weights (an activation whose buffer is reused) is never kept: new
        // values at the same address give their own product.
        attn::cpu::GemmPackScope scope(size_t(1) << 30);
        GemmArgs act = g;
        act.b_weights = false;
        ASSERT_TRUE(attn::cpu::sgemm(act, 2));
        EXPECT_EQ(scope.bytes(), 0u);
        for (float& x : bw) x = -x;
        for (uint16_t& x : b16) x ^= 0x8000;
        ASSERT_TRUE(attn::cpu::sgemm(act, 2));
        for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], -plain[i]);
      }
    }
  }
}

TEST(Bf16Bits, RoundingIsNearestEven) {
  EXPECT_EQ(attn::cpu::bf16_bits(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(attn::cpu::bf16_bits(1.00390625f), 0x3f80);
  EXPECT_EQ(attn::cpu::bf16_bits(1.01171875f), 0x3f82);  // 1 + 3 * 2^-8: up to even
  EXPECT_EQ(attn::cpu::bf16_bits(-2.0f), 0xc000);
  const uint16_t h = attn::cpu::bf16_bits(3.1f);
  float back;
  attn::cpu::widen(attn::cpu::ElemType::Bf16, &h, 1, &back);
  EXPECT_EQ(back, attn::round_bf16(3.1f));
}

}  // namespace
