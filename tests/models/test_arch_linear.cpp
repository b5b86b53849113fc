// linear() (models/arch/layers.h) against a double-precision product, in both weight layouts, for
// one row (the decode step's matrix-vector path, vectorised eight rows at a time where the CPU
// has AVX-512) and for several rows (the GEMM path), on sizes that leave remainders everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

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
        l.w = w.data();
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

}  // namespace
}  // namespace attn
