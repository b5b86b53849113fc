#include "models/arch/interpolate.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace attn::models {
namespace {

// Cubic convolution weights for the 4 taps around a fractional offset t in [0, 1).
std::array<double, 4> cubic_weights(double t) {
  const double a = -0.75;
  auto near = [&](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

struct Taps {
  std::array<int, 4> idx;
  std::array<double, 4> w;
};

std::vector<Taps> taps(int in, int out) {
  std::vector<Taps> t(static_cast<size_t>(out));
  const double scale = double(in) / out;
  for (int o = 0; o < out; ++o) {
    const double src = (o + 0.5) * scale - 0.5;  // align_corners=False
    const double f = std::floor(src);
    const int i0 = int(f);
    t[size_t(o)].w = cubic_weights(src - f);
    for (int k = 0; k < 4; ++k) t[size_t(o)].idx[size_t(k)] = std::clamp(i0 - 1 + k, 0, in - 1);
  }
  return t;
}

}  // namespace

std::vector<float> interpolate_grid_bicubic(const float* src, int h0, int w0, int c, int h, int w) {
  const std::vector<Taps> ty = taps(h0, h), tx = taps(w0, w);
  std::vector<float> out(size_t(h) * w * c);
  std::vector<double> acc(static_cast<size_t>(c));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int ky = 0; ky < 4; ++ky) {
        for (int kx = 0; kx < 4; ++kx) {
          const double wt = ty[size_t(y)].w[size_t(ky)] * tx[size_t(x)].w[size_t(kx)];
          const float* s =
              src +
              (size_t(ty[size_t(y)].idx[size_t(ky)]) * w0 + tx[size_t(x)].idx[size_t(kx)]) * c;
          for (int j = 0; j < c; ++j) acc[size_t(j)] += wt * s[j];
        }
      }
      for (int j = 0; j < c; ++j) out[(size_t(y) * w + x) * c + j] = float(acc[size_t(j)]);
    }
  }
  return out;
}

}  // namespace attn::models
