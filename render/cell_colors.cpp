#include "render/cell_colors.h"

#include <algorithm>
#include <cmath>

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

void colorize(const PanelTile& tile, const ColorScale& s, std::vector<uint8_t>& rgba) {
  const std::vector<uint8_t> lut = colormap_lut_rgba8();
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
      const float t = scale_position(s, dp);
      const int i = std::clamp(int(t * 255.f + 0.5f), 0, 255);
      const float k = std::clamp(kept, 0.f, 1.f);
      // Dropped: dark grey turning red with the dense probability that was dropped.
      const float dr = 0.10f + (0.95f - 0.10f) * t, dg = 0.10f + (0.15f - 0.10f) * t,
                  db = 0.12f + (0.20f - 0.12f) * t;
      out[0] = uint8_t(std::lround((1 - k) * dr * 255.f + k * cm[i * 4 + 0]));
      out[1] = uint8_t(std::lround((1 - k) * dg * 255.f + k * cm[i * 4 + 1]));
      out[2] = uint8_t(std::lround((1 - k) * db * 255.f + k * cm[i * 4 + 2]));
      out[3] = 255;
    } else {
      const int i = std::clamp(int(scale_position(s, vp) * 255.f + 0.5f), 0, 255);
      std::copy(cm + i * 4, cm + i * 4 + 4, out);
    }
  }
}

}  // namespace attn::render
