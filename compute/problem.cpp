#include "compute/problem.h"

#include <cmath>
#include <random>
#include <string>

#include "compute/error.h"

namespace attn {

float Problem::effective_scale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(float(d));
}

namespace {

void check_finite(const std::vector<float>& t, const char* name, int rows_per_head, int d) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (!std::isfinite(t[i])) {
      size_t row = i / size_t(d);
      throw Error(ErrorCode::NonFinite,
                  std::string("problem: ") + name + " has a non-finite value (" +
                      (std::isnan(t[i]) ? "NaN" : "Inf") + ") at head " +
                      std::to_string(row / rows_per_head) + ", token " +
                      std::to_string(row % rows_per_head) + ", dim " + std::to_string(i % d));
    }
  }
}

void check_positions(const std::vector<int32_t>& pos, int n, const char* name) {
  if (pos.empty()) return;
  require(int(pos.size()) == n, ErrorCode::InvalidArgument,
          std::string("problem: ") + name + " has " + std::to_string(pos.size()) +
              " entries, expected " + std::to_string(n));
  for (int i = 1; i < n; ++i)
    require(pos[i] > pos[i - 1], ErrorCode::InvalidArgument,
            std::string("problem: ") + name + " must be strictly increasing (index " +
                std::to_string(i) + ")");
}

}  // namespace

void validate(const Problem& p) {
  auto fail = [](const std::string& m) { throw Error(ErrorCode::InvalidArgument, "problem: " + m); };
  if (p.d <= 0) fail("head dimension d must be positive, got " + std::to_string(p.d));
  if (p.n_heads <= 0) fail("n_heads must be positive, got " + std::to_string(p.n_heads));
  if (p.n_kv_heads <= 0) fail("n_kv_heads must be positive, got " + std::to_string(p.n_kv_heads));
  if (p.n_heads % p.n_kv_heads != 0)
    fail("n_heads (" + std::to_string(p.n_heads) + ") must be a multiple of n_kv_heads (" +
         std::to_string(p.n_kv_heads) + ") for grouped-query attention");
  if (p.n_q <= 0 || p.n_k <= 0)
    fail("n_q and n_k must be positive, got n_q=" + std::to_string(p.n_q) +
         ", n_k=" + std::to_string(p.n_k));
  auto expect = [&](const std::vector<float>& t, const char* name, size_t heads, size_t rows) {
    size_t want = heads * rows * size_t(p.d);
    if (t.size() != want)
      fail(std::string(name) + " has " + std::to_string(t.size()) + " floats, expected " +
           std::to_string(heads) + " x " + std::to_string(rows) + " x " + std::to_string(p.d) +
           " = " + std::to_string(want));
  };
  expect(p.q, "Q", p.n_heads, p.n_q);
  expect(p.k, "K", p.n_kv_heads, p.n_k);
  expect(p.v, "V", p.n_kv_heads, p.n_k);
  check_positions(p.q_pos, p.n_q, "q_pos");
  check_positions(p.k_pos, p.n_k, "k_pos");
  if (!p.labels.empty() && int(p.labels.size()) != p.n_k)
    fail("labels has " + std::to_string(p.labels.size()) + " entries, expected n_k = " +
         std::to_string(p.n_k));
  if (!std::isfinite(p.scale)) fail("scale must be finite");
  check_finite(p.q, "Q", p.n_q, p.d);
  check_finite(p.k, "K", p.n_k, p.d);
  check_finite(p.v, "V", p.n_k, p.d);
}

Problem random_problem(int n_heads, int n_kv_heads, int n_q, int n_k, int d, bool causal,
                       uint64_t seed, float qk_std) {
  Problem p;
  p.n_heads = n_heads;
  p.n_kv_heads = n_kv_heads;
  p.n_q = n_q;
  p.n_k = n_k;
  p.d = d;
  p.causal = causal;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& t, size_t n, float s) {
    t.resize(n);
    for (auto& x : t) x = s * nd(rng);
  };
  fill(p.q, size_t(n_heads) * n_q * d, qk_std);
  fill(p.k, size_t(n_kv_heads) * n_k * d, qk_std);
  fill(p.v, size_t(n_kv_heads) * n_k * d, 1.0f);
  return p;
}

}  // namespace attn
