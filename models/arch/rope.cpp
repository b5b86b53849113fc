#include "models/arch/rope.h"

#include <cmath>

#include "compute/error.h"
#include "compute/parallel.h"

namespace attn::models {
namespace {

std::vector<float> plain_inv_freq(int d, double theta) {
  std::vector<float> f(size_t(d / 2));
  for (int i = 0; i < d / 2; ++i) {
    // f32 as in transformers: 1 / base ** (arange(0, d, 2).float() / d)
    const float expo = float(2 * i) / float(d);
    f[size_t(i)] = 1.0f / std::pow(float(theta), expo);
  }
  return f;
}

// Llama 3.1's frequency-dependent scaling: long wavelengths are divided by `factor`, short ones
// kept, the band between blended smoothly.
void llama3_scale(std::vector<float>& f, const RopeScaling& s) {
  const double factor = s.factor;
  const double lo = *s.low_freq_factor, hi = *s.high_freq_factor;
  const double old_len = double(*s.original_max_position_embeddings);
  const double low_wavelen = old_len / lo, high_wavelen = old_len / hi;
  for (float& x : f) {
    const double wavelen = 2.0 * M_PI / double(x);
    if (wavelen > low_wavelen) {
      x = float(double(x) / factor);
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_len / wavelen - lo) / (hi - lo);
      x = float((1.0 - smooth) * double(x) / factor + smooth * double(x));
    }
  }
}

}  // namespace

Rope::Rope(int head_dim, double theta, const std::optional<RopeScaling>& scaling,
           int64_t max_positions, const std::string& source)
    : d_(head_dim), theta_(theta), max_positions_(max_positions) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw Error(ErrorCode::Format, source +
                                       ": rotary embeddings need an even head dimension, got " +
                                       std::to_string(head_dim));
  }
  base_inv_freq_ = plain_inv_freq(d_, theta_);
  if (!scaling || scaling->type == "default") return;
  type_ = scaling->type;
  factor_ = scaling->factor;
  if (type_ == "linear") {
    for (float& x : base_inv_freq_) x = float(double(x) / factor_);
  } else if (type_ == "llama3") {
    llama3_scale(base_inv_freq_, *scaling);
  } else if (type_ == "dynamic") {
    if (max_positions_ <= 0) {
      throw Error(ErrorCode::Format,
                  source + ": rope_scaling 'dynamic' needs max_position_embeddings");
    }
  } else {
    throw Error(ErrorCode::Unsupported,
                source + ": rope_scaling type '" + type_ +
                    "' is not supported (default, linear, dynamic, llama3)");
  }
}

std::vector<float> Rope::inv_freq(int n) const {
  if (type_ == "dynamic" && n > max_positions_) {
    // NTK-aware: base * ((factor * n / max) - (factor - 1)) ** (d / (d - 2)).
    const double base =
        theta_ * std::pow(factor_ * double(n) / double(max_positions_) - (factor_ - 1.0),
                          double(d_) / double(d_ - 2));
    return plain_inv_freq(d_, base);
  }
  return base_inv_freq_;
}

void Rope::apply(float* x, int heads, int n, int threads, int pos0, bool inverse) const {
  const int half = d_ / 2;
  const std::vector<float> f = inv_freq(pos0 + n);
  std::vector<float> cs(size_t(n) * half), sn(size_t(n) * half);  // f32 [n, d/2]
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < half; ++i) {
      const float angle = float(pos0 + t) * f[size_t(i)];
      cs[size_t(t) * half + i] = std::cos(angle);
      sn[size_t(t) * half + i] = inverse ? -std::sin(angle) : std::sin(angle);
    }
  }
  parallel_for(
      heads,
      [&](int h) {
        for (int t = 0; t < n; ++t) {
          float* r = x + (size_t(h) * n + t) * d_;
          const float* c = cs.data() + size_t(t) * half;
          const float* s = sn.data() + size_t(t) * half;
          for (int i = 0; i < half; ++i) {
            const float a = r[i], b = r[i + half];
            r[i] = a * c[i] - b * s[i];
            r[i + half] = b * c[i] + a * s[i];
          }
        }
      },
      threads);
}

void Rope::apply_at(float* x, int n, const int32_t* pos, int length, bool inverse) const {
  const int half = d_ / 2;
  const std::vector<float> f = inv_freq(length);
  for (int t = 0; t < n; ++t) {
    float* r = x + size_t(t) * d_;
    for (int i = 0; i < half; ++i) {
      const float angle = float(pos[t]) * f[size_t(i)];  // as apply(): the angle in f32
      const float c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
      const float a = r[i], b = r[i + half];
      r[i] = a * c - b * s;
      r[i + half] = b * c + a * s;
    }
  }
}

}  // namespace attn::models
