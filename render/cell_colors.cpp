#include "render/cell_colors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace attn::render {

float scale_position(const ColorScale& s, float v) {
  if (s.log_scale) {
    const float lo = std::max(s.log_floor, 1e-12f);
    const float hi = std::max(s.vmax, lo * 10.f);
    return std::clamp((std::log(std::max(v, lo)) - std::log(lo)) / (std::log(hi) - std::log(lo)),
                      0.f, 1.f);
  }
  return std::clamp(v / std::max(s.vmax, 1e-12f), 0.f, 1.f);
}

namespace {

// log2(x) for normal x > 0 to 2e-4: the exponent from the float's bits and a quartic (least
// squares on [1, 2)) on the mantissa.
// Colours have 256 levels over a log range of ~13 octaves, so this is exact to the level, and
// several times cheaper than std::log for the ~10^6 cells a frame's tiles hold.
inline float fast_log2(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const float e = float(int((bits >> 23) & 0xff) - 127);
  bits = (bits & 0x007fffffu) | 0x3f800000u;  // mantissa in [1, 2)
  float m;
  std::memcpy(&m, &bits, sizeof m);
  const float t = m - 1.0f;
  return e + t * (1.43854793f + t * (-0.678089456f + t * (0.323646308f + t * -0.0842946558f)));
}

// Scale position of a probability with the logarithms of the bounds taken once per tile.
struct FastScale {
  explicit FastScale(const ColorScale& s) : s_(s) {
    lo_ = std::max(s.log_floor, 1e-12f);
    const float hi = std::max(s.vmax, lo_ * 10.f);
    log_lo_ = std::log2(lo_);
    inv_ = 1.0f / (std::log2(hi) - log_lo_);
    inv_vmax_ = 1.0f / std::max(s.vmax, 1e-12f);
  }
  float operator()(float v) const {
    if (s_.log_scale) return std::clamp((fast_log2(std::max(v, lo_)) - log_lo_) * inv_, 0.f, 1.f);
    return std::clamp(v * inv_vmax_, 0.f, 1.f);
  }
  const ColorScale& s_;
  float lo_, log_lo_, inv_, inv_vmax_;
};

}  // namespace

void colorize(const PanelTile& tile, const ColorScale& s, std::vector<uint8_t>& rgba) {
  static const std::vector<uint8_t> lut = colormap_lut_rgba8();
  const FastScale position(s);
  const uint8_t* cm = &lut[size_t(s.colormap) * 256 * 4];
  const uint8_t* div = &lut[size_t(Colormap::Diverging) * 256 * 4];
  const size_t n = size_t(tile.w) * size_t(tile.h);
  rgba.resize(n * 4);
  const float lo = std::max(s.log_floor, 1e-12f), dhi = std::max(s.dmax, 1e-12f);
  for (size_t c = 0; c < n; ++c) {
    const float vp = tile.texels[c * 4], dp = tile.texels[c * 4 + 1], kept = tile.texels[c * 4 + 2];
    uint8_t* out = &rgba[c * 4];
    if (s.mode == DisplayMode::Difference) {
      const float d = vp - dp;
      const float x = s.log_scale
                          ? std::copysign(std::log1p(std::fabs(d) / lo) / std::log1p(dhi / lo), d)
                          : d / dhi;
      const int i =
          std::clamp(int((0.5f + 0.5f * std::clamp(x, -1.f, 1.f)) * 255.f + 0.5f), 0, 255);
      std::copy(div + i * 4, div + i * 4 + 4, out);
    } else if (s.mode == DisplayMode::KeptSet) {
      const float t = position(dp);
      const int i = std::clamp(int(t * 255.f + 0.5f), 0, 255);
      const float k = std::clamp(kept, 0.f, 1.f);
      // Dropped: dark grey turning red with the dense probability that was dropped.
      const float dr = 0.10f + (0.95f - 0.10f) * t, dg = 0.10f + (0.15f - 0.10f) * t,
                  db = 0.12f + (0.20f - 0.12f) * t;
      out[0] = uint8_t(std::lround((1 - k) * dr * 255.f + k * cm[i * 4 + 0]));
      out[1] = uint8_t(std::lround((1 - k) * dg * 255.f + k * cm[i * 4 + 1]));
      out[2] = uint8_t(std::lround((1 - k) * db * 255.f + k * cm[i * 4 + 2]));
      out[3] = 255;
    } else if (kept <= 0 && tile.texels[c * 4 + 3] > 0) {
      // Dropped by the variant: a colour outside every map, never a small probability.
      out[0] = kDroppedRgb.r;
      out[1] = kDroppedRgb.g;
      out[2] = kDroppedRgb.b;
      out[3] = 255;
    } else {
      const int i = std::clamp(int(position(vp) * 255.f + 0.5f), 0, 255);
      std::copy(cm + i * 4, cm + i * 4 + 4, out);
    }
  }
}

}  // namespace attn::render
