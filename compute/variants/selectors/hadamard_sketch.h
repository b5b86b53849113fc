// Randomised Hadamard sketch (subsampled randomised Hadamard transform): x in R^d is zero-padded
// to D = 2^ceil(log2 d), multiplied by seeded random signs, transformed by the orthonormal fast
// Walsh-Hadamard transform, and m = min(sketch_dim, D) seeded coordinates are kept, scaled by
// sqrt(D / m) so that sketch(x) . sketch(y) is an unbiased estimate of x . y.
#pragma once
#include <cstdint>
#include <vector>

namespace attn {

class HadamardSketch {
 public:
  HadamardSketch(int d, int sketch_dim, uint64_t seed);
  int dim() const { return int(keep_.size()); }  // m
  // Sketches n rows of length d (row-major) into n rows of length m; adds flops to *flops.
  std::vector<double> apply(const double* x, int n, double* flops) const;

 private:
  int d_, D_;
  std::vector<double> sign_;  // [D]: +-1
  std::vector<int> keep_;     // [m]: kept coordinates, ascending
};

// In-place fast Walsh-Hadamard transform of a power-of-two length vector (unnormalised).
void fwht(double* x, int n);

}  // namespace attn
