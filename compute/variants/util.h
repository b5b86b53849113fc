// Small integer and random helpers shared by the pattern implementations.
#pragma once
#include <cstdint>

#include "compute/problem.h"

namespace attn::detail {

// Floor division and modulo for possibly negative positions (b > 0).
inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
inline int64_t floor_mod(int64_t a, int64_t b) {
  return a - floor_div(a, b) * b;
}
inline int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

// Number of integers in [lo, hi] (0 when empty).
inline int64_t span(int64_t lo, int64_t hi) {
  return hi >= lo ? hi - lo + 1 : 0;
}

// True when the problem uses the default positions (keys 0..n_k-1, queries the last n_q tokens),
// for which static patterns have closed-form row counts.
inline bool default_positions(const Problem& p) {
  return p.q_pos.empty() && p.k_pos.empty();
}

// Largest key index visible from a query at position qp with default key positions
// (n_k - 1 when bidirectional); negative when none.
inline int64_t last_key(const Problem& p, int64_t qp) {
  if (!p.causal) return p.n_k - 1;
  return qp < p.n_k - 1 ? qp : p.n_k - 1;
}

// SplitMix64 (Steele, Lea, Flood 2014): a tiny deterministic generator for seeded choices.
struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (n > 0); the modulo bias is negligible for the small n used here.
  uint64_t below(uint64_t n) { return next() % n; }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};

inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  SplitMix64 g(a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull));
  return g.next();
}

}  // namespace attn::detail
