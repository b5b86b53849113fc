#include "compute/variants/selectors/hadamard_sketch.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "compute/variants/util.h"

namespace attn {

void fwht(double* x, int n) {
  for (int len = 1; len < n; len <<= 1)
    for (int i = 0; i < n; i += len << 1)
      for (int j = i; j < i + len; ++j) {
        double a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
}

HadamardSketch::HadamardSketch(int d, int sketch_dim, uint64_t seed) : d_(d), D_(1) {
  while (D_ < d) D_ <<= 1;
  detail::SplitMix64 rng(seed);
  sign_.resize(size_t(D_));
  for (auto& s : sign_) s = (rng.next() >> 63) ? -1.0 : 1.0;
  std::vector<int> idx(static_cast<size_t>(D_));
  std::iota(idx.begin(), idx.end(), 0);
  int m = std::min(sketch_dim, D_);
  for (int t = 0; t < m; ++t) std::swap(idx[t], idx[t + rng.below(uint64_t(D_ - t))]);
  keep_.assign(idx.begin(), idx.begin() + m);
  std::sort(keep_.begin(), keep_.end());
}

std::vector<double> HadamardSketch::apply(const double* x, int n, double* flops) const {
  int m = dim();
  // Orthonormal transform (1/sqrt(D)) times the subsampling correction sqrt(D/m).
  double scale = 1.0 / std::sqrt(double(m));
  std::vector<double> out(static_cast<size_t>(n) * m), buf(static_cast<size_t>(D_));
  for (int i = 0; i < n; ++i) {
    std::fill(buf.begin(), buf.end(), 0.0);
    for (int t = 0; t < d_; ++t) buf[t] = sign_[t] * x[size_t(i) * d_ + t];
    fwht(buf.data(), D_);
    for (int t = 0; t < m; ++t) out[size_t(i) * m + t] = scale * buf[keep_[t]];
  }
  int log_d = 0;
  while ((1 << log_d) < D_) ++log_d;
  *flops += double(n) * (double(d_) + double(D_) * log_d + m);
  return out;
}

}  // namespace attn
