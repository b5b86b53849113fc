// The softplus/L1 normaliser's vectorised arithmetic: log(1 + x) on [0, 1] against the C library,
// and whole runs whose scores sit where softplus is a bare exponential (all far below 0) or the
// score itself (far above), against the f64 reference backend.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "compute/backend.h"
#include "compute/cpu/simd.h"
#include "compute/metrics.h"
#include "compute/registry.h"

namespace attn {
namespace {

namespace simd = cpu::ATTN_CPU_NS;

TEST(Softplus, Log1pOnTheUnitIntervalMatchesTheCLibrary) {
  std::vector<float> xs = {0.0f, 1e-38f, 1e-30f, 1e-20f, 1e-10f, 1e-7f, 3e-5f, 0.01f, 0.5f, 1.0f};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < 4000; ++i) xs.push_back(u(rng));
  for (int i = 0; i < 400; ++i) xs.push_back(std::ldexp(u(rng), -int(rng() % 120)));
  while (xs.size() % simd::kVW) xs.push_back(0.25f);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); i += simd::kVW) {
    float out[simd::kVW];
    simd::storeu(out, simd::log1p_unitv(simd::loadu(xs.data() + i)));
    for (int e = 0; e < simd::kVW; ++e) {
      const double want = std::log1p(double(xs[i + e]));
      const double err = want == 0 ? std::fabs(out[e]) : std::fabs(out[e] - want) / want;
      worst = std::max(worst, err);
      ASSERT_LT(err, 4e-7) << "x = " << xs[i + e] << ": " << out[e] << " against " << want;
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
}

// Scores s = -u_i v_j / 2 (d = 4, scale 1/2) with u, v in [a, b]: one sign and magnitude for
// every entry of the problem.
Problem scored_problem(float a, float b, float sign, int n, uint32_t seed) {
  Problem p = random_problem(2, 2, n, n, 4, true, seed);
  p.scale = 0.5f;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(a, b);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < n; ++i) {
      float* q = &p.q[(size_t(h) * n + i) * 4];
      float* k = &p.k[(size_t(h) * n + i) * 4];
      q[0] = sign * u(rng), k[0] = u(rng);
      for (int c = 1; c < 4; ++c) q[c] = 0.0f, k[c] *= 0.01f;
    }
  return p;
}

TEST(Softplus, FarNegativeAndFarPositiveScoresMatchTheReference) {
  std::unique_ptr<Backend> cpu = make_backend("cpu"), ref = make_backend("reference");
  // Far below 0 softplus is e^s (1e-26 .. 1e-17 here): the row's L1 normalisation turns it into a
  // softmax, which only holds if log(1 + e^s) keeps e^s's precision. Far above 0 it is s itself.
  for (const auto& [a, b, sign] : {std::tuple{9.0f, 11.0f, -1.0f}, std::tuple{9.0f, 11.0f, 1.0f},
                                   std::tuple{0.0f, 3.0f, -1.0f}})
    for (const char* spec : {"dense+softplus", "window(size=37)+softplus", "topk(k=9)+softplus"}) {
      const Problem p = scored_problem(a, b, sign, 301, 7);
      const Result x = run(make_variant(spec), p, *cpu), y = run(make_variant(spec), p, *ref);
      EXPECT_LT(relative_error(x.o, y.o), 1e-5)
          << spec << " scores in +-[" << a * a / 2 << ", " << b * b / 2 << "], sign " << sign;
    }
}

}  // namespace
}  // namespace attn
