#include "render/attribution_style.h"

#include <algorithm>
#include <cmath>

#include "render/colormap.h"

namespace attn::render {
namespace {

ImU32 pack(float r, float g, float b, float a = 1) {
  auto c = [](float v) { return int(std::lround(std::clamp(v, 0.f, 1.f) * 255)); };
  return IM_COL32(c(r), c(g), c(b), c(a));
}

// WCAG relative luminance of an sRGB colour (0..1 components).
float luminance(float r, float g, float b) {
  auto lin = [](float c) {
    return c <= 0.04045f ? c / 12.92f : std::pow((c + 0.055f) / 1.055f, 2.4f);
  };
  return 0.2126f * lin(r) + 0.7152f * lin(g) + 0.0722f * lin(b);
}

}  // namespace

AttributionFill attribution_fill(float x, bool dark, const float bg[4]) {
  if (!std::isfinite(x)) x = 0;
  x = std::clamp(x, -1.f, 1.f);
  float r, g, b;
  if (!dark) {
    const Rgb c = colormap_rgb(Colormap::Diverging, 0.5 + 0.5 * double(x));
    r = c.r, g = c.g, b = c.b;
  } else {
    // Towards the map's strong but not darkest colour, in proportion to |x|.
    const Rgb c = colormap_rgb(Colormap::Diverging, x >= 0 ? 0.86 : 0.14);
    const float a = std::pow(std::fabs(x), 0.8f);
    r = bg[0] + (c.r - bg[0]) * a;
    g = bg[1] + (c.g - bg[1]) * a;
    b = bg[2] + (c.b - bg[2]) * a;
  }
  // Text: whichever of the near-black and near-white below contrasts more (WCAG ratios).
  const float l = luminance(r, g, b);
  const float on_black = (l + 0.05f) / (luminance(0.08f, 0.08f, 0.086f) + 0.05f);
  const float on_white = (luminance(0.96f, 0.96f, 0.96f) + 0.05f) / (l + 0.05f);
  const bool dark_text = on_black > on_white;
  return {pack(r, g, b), dark_text ? IM_COL32(20, 20, 22, 255) : IM_COL32(245, 245, 245, 255)};
}

ImU32 attribution_overlay(float x) {
  if (!std::isfinite(x)) x = 0;
  const Rgb c = colormap_rgb(Colormap::Diverging, x >= 0 ? 0.9 : 0.1);
  return pack(c.r, c.g, c.b, 0.85f * std::pow(std::min(1.f, std::fabs(x)), 0.7f));
}

ImU32 attribution_color(size_t i) {
  static const ImU32 kTableau10[] = {IM_COL32(78, 121, 167, 255),  IM_COL32(242, 142, 43, 255),
                                     IM_COL32(225, 87, 89, 255),   IM_COL32(118, 183, 178, 255),
                                     IM_COL32(89, 161, 79, 255),   IM_COL32(237, 201, 72, 255),
                                     IM_COL32(176, 122, 161, 255), IM_COL32(255, 157, 167, 255),
                                     IM_COL32(156, 117, 95, 255),  IM_COL32(186, 176, 172, 255)};
  return kTableau10[i % 10];
}

ImU32 attribution_random_color(bool dark) {
  return dark ? IM_COL32(150, 150, 155, 255) : IM_COL32(110, 110, 115, 255);
}

}  // namespace attn::render
