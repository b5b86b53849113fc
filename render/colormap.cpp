#include "render/colormap.h"

#include <algorithm>
#include <cmath>

namespace attn::render {
namespace {

// Ten evenly spaced samples of each map, 0xRRGGBB.
constexpr uint32_t kSamples[kColormapCount][10] = {
    {0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e, 0x1f9e89, 0x35b779, 0x6ece58, 0xb5de2b,
     0xfde725},
    {0x000004, 0x180f3d, 0x440f76, 0x721f81, 0x9e2f7f, 0xcd4071, 0xf1605d, 0xfd9668, 0xfeca8d,
     0xfcfdbf},
    {0x00224e, 0x123570, 0x3b496c, 0x575d6d, 0x707173, 0x8a8779, 0xa69d75, 0xc4b56c, 0xe4cf5b,
     0xfee838},
    {0x053061, 0x2166ac, 0x4393c3, 0x92c5de, 0xf7f7f7, 0xf7f7f7, 0xf4a582, 0xd6604d, 0xb2182b,
     0x67001f},
};

Rgb unpack(uint32_t c) {
  return {float((c >> 16) & 0xff) / 255.f, float((c >> 8) & 0xff) / 255.f, float(c & 0xff) / 255.f};
}

}  // namespace

const char* colormap_name(Colormap c) {
  switch (c) {
    case Colormap::Viridis:
      return "viridis";
    case Colormap::Magma:
      return "magma";
    case Colormap::Cividis:
      return "cividis";
    case Colormap::Diverging:
      return "diverging";
  }
  return "?";
}

Rgb colormap_rgb(Colormap c, float t) {
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.f, 1.f) * 9.f;
  const int i = std::min(int(t), 8);
  const float f = t - float(i);
  const Rgb a = unpack(kSamples[int(c)][i]), b = unpack(kSamples[int(c)][i + 1]);
  return {a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f};
}

uint32_t colormap_u32(Colormap c, float t, int alpha) {
  const Rgb x = colormap_rgb(c, t);
  auto u8 = [](float v) { return uint32_t(std::lround(std::clamp(v, 0.f, 1.f) * 255.f)); };
  return (uint32_t(alpha) << 24) | (u8(x.b) << 16) | (u8(x.g) << 8) | u8(x.r);
}

std::vector<uint8_t> colormap_lut_rgba8() {
  std::vector<uint8_t> out(size_t(kColormapCount) * 256 * 4);
  for (int row = 0; row < kColormapCount; ++row)
    for (int i = 0; i < 256; ++i) {
      const Rgb x = colormap_rgb(Colormap(row), float(i) / 255.f);
      uint8_t* p = &out[(size_t(row) * 256 + i) * 4];
      p[0] = uint8_t(std::lround(x.r * 255));
      p[1] = uint8_t(std::lround(x.g * 255));
      p[2] = uint8_t(std::lround(x.b * 255));
      p[3] = 255;
    }
  return out;
}

}  // namespace attn::render
