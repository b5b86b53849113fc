// linear() (models/arch/layers.h) against a double-precision product, in both weight layouts, for
// one row (the decode step's matrix-vector path, vectorised eight rows at a time where the CPU
// has AVX-512) and for several rows (the GEMM path), on sizes that leave remainders everywhere.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "compute/error.h"
#include "models/arch/layers.h"

namespace attn {
namespace {

TEST(ArchLinear, MatchesADoubleProductOnOddSizes) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (const bool in_out : {true, false})
    for (const int n : {1, 3, 9})
      for (const auto& [in, out] :
           {std::pair{1, 1}, {7, 5}, {8, 16}, {23, 37}, {64, 3}, {203, 131}, {768, 771}}) {
        std::vector<float> w(static_cast<size_t>(in) * out), b(static_cast<size_t>(out)),
            x(static_cast<size_t>(n) * in);
        for (float& v : w) v = g(rng);
        for (float& v : b) v = g(rng);
        for (float& v : x) v = g(rng);
        models::Linear l;
        l.w = {w.data()};
        l.b = b.data();
        l.in = in;
        l.out = out;
        l.in_out = in_out;
        std::vector<float> y(size_t(n) * out, NAN);
        linear(x.data(), n, l, y.data(), 2);
        for (int r = 0; r < n; ++r)
          for (int o = 0; o < out; ++o) {
            double want = b[size_t(o)], mag = std::abs(want);
            for (int i = 0; i < in; ++i) {
              const double wv = in_out ? w[size_t(i) * out + o] : w[size_t(o) * in + i];
              want += double(x[size_t(r) * in + i]) * wv;
              mag += std::abs(double(x[size_t(r) * in + i]) * wv);
            }
            ASSERT_NEAR(y[size_t(r) * out + o], want, 1e-5 * mag + 1e-6)
                << (in_out ? "[in, out]" : "[out, in]") << " n=" << n << " in=" << in
                << " out=" << out << " at " << r << "," << o;
          }
      }
}

// 16-bit weights as stored, on each GEMM path (ATTNSCOPE_GEMM forces one): rows < 8 take the
// matrix-vector path (widened in registers, exact), more rows the GEMM (the bf16 paths, AMX and
// vdpbf16ps, round x to bf16, so their reference rounds x too; the widening paths are exact).
TEST(ArchLinear, Reads16BitWeightsInPlace) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (const char* force : {"", "avx512", "eigen"}) {
    setenv("ATTNSCOPE_GEMM", force, 1);
    for (const cpu::ElemType t : {cpu::ElemType::Bf16, cpu::ElemType::F16})
      for (const bool in_out : {true, false})
        for (const int n : {1, 3, 7, 9, 40})
          for (const auto& [in, out] : {std::pair{1, 1}, {7, 5}, {33, 47}, {203, 131}, {520, 77}}) {
            std::vector<uint16_t> w16(static_cast<size_t>(in) * out);
            std::vector<float> w(w16.size()), b(static_cast<size_t>(out)),
                x(static_cast<size_t>(n) * in);
            for (size_t i = 0; i < w16.size(); ++i) {
              const float v = g(rng);
              w16[i] = t == cpu::ElemType::Bf16 ? cpu::bf16_bits(v)
                                                : uint16_t(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
              cpu::widen(t, &w16[i], 1, &w[i]);
            }
            for (float& v : b) v = g(rng);
            for (float& v : x) v = g(rng);
            models::Linear l;
            l.w = {w16.data(), t};
            l.b = b.data();
            l.in = in;
            l.out = out;
            l.in_out = in_out;
            std::vector<float> y(size_t(n) * out, NAN);
            linear(x.data(), n, l, y.data(), 2);
            const std::string path = cpu::gemm_path(t);
            const bool rounds_x =
                n >= 8 && t == cpu::ElemType::Bf16 && (path == "amx" || path == "dpbf16");
            for (int r = 0; r < n; ++r)
              for (int o = 0; o < out; ++o) {
                double want = b[size_t(o)], mag = std::abs(want);
                for (int i = 0; i < in; ++i) {
                  const double wv = in_out ? w[size_t(i) * out + o] : w[size_t(o) * in + i];
                  float xv = x[size_t(r) * in + i];
                  if (rounds_x) {
                    const uint16_t h = cpu::bf16_bits(xv);
                    cpu::widen(t, &h, 1, &xv);
                  }
                  want += double(xv) * wv;
                  mag += std::abs(double(xv) * wv);
                }
                ASSERT_NEAR(y[size_t(r) * out + o], want, 1e-5 * mag + 1e-6)
                    << force << " " << cpu::elem_type_name(t) << " "
                    << (in_out ? "[in, out]" : "[out, in]") << " n=" << n << " in=" << in
                    << " out=" << out << " at " << r << "," << o;
              }
          }
  }
  unsetenv("ATTNSCOPE_GEMM");
}

// MatmulScope(Bf16): GEMMs of 8 or more rows multiply x and f32 weights both rounded to bf16
// (the reference rounds both), fewer rows stay exact; the scope restores the caller's precision.
TEST(ArchLinear, Bf16MatmulScopeRoundsBothOperands) {
  std::mt19937 rng(6);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int in = 203, out = 131;
  std::vector<float> w(size_t(in) * out), x(size_t(16) * in);
  for (float& v : w) v = g(rng);
  for (float& v : x) v = g(rng);
  auto r16 = [](float v) {
    float f;
    const uint16_t h = cpu::bf16_bits(v);
    cpu::widen(cpu::ElemType::Bf16, &h, 1, &f);
    return f;
  };
  EXPECT_EQ(models::current_matmul(), models::Matmul::F32);
  for (const bool in_out : {true, false}) {
    models::Linear l;
    l.w = {w.data()};
    l.in = in;
    l.out = out;
    l.in_out = in_out;
    for (const int n : {3, 16}) {
      std::vector<float> y(size_t(n) * out, NAN);
      {
        const models::MatmulScope scope(models::Matmul::Bf16);
        EXPECT_EQ(models::current_matmul(), models::Matmul::Bf16);
        linear(x.data(), n, l, y.data(), 2);
      }
      EXPECT_EQ(models::current_matmul(), models::Matmul::F32);
      const bool rounds = n >= 8;
      double worst = 0;
      for (int r = 0; r < n; ++r)
        for (int o = 0; o < out; ++o) {
          double want = 0, mag = 0;
          for (int i = 0; i < in; ++i) {
            float xv = x[size_t(r) * in + i];
            float wv = in_out ? w[size_t(i) * out + o] : w[size_t(o) * in + i];
            if (rounds) {
              xv = r16(xv);
              wv = r16(wv);
            }
            want += double(xv) * wv;
            mag += std::abs(double(xv) * wv);
          }
          worst = std::max(worst, std::abs(y[size_t(r) * out + o] - want) / mag);
        }
      EXPECT_LT(worst, 1e-6) << "n=" << n << (in_out ? " [in, out]" : " [out, in]");
    }
  }
  EXPECT_EQ(models::parse_matmul("bf16"), models::Matmul::Bf16);
  EXPECT_THROW(models::parse_matmul("f16"), Error);
}

}  // namespace
}  // namespace attn
