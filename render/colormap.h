// Perceptual colormaps (viridis, magma, cividis) and a diverging blue-white-red map, as
// piecewise-linear fits through ten samples of each, shared by the shader's lookup texture and
// by ImGui-drawn views (colorbars, head grid, sinks) so that every view agrees.
#pragma once
#include <cstdint>
#include <vector>

namespace attn::render {

enum class Colormap { Viridis = 0, Magma = 1, Cividis = 2, Diverging = 3 };
constexpr int kColormapCount = 4;
const char* colormap_name(Colormap c);

struct Rgb {
  float r = 0, g = 0, b = 0;  // 0..1
};

// Colour at t in [0, 1] (clamped).
Rgb colormap_rgb(Colormap c, float t);
// ImGui-packed colour (IM_COL32 layout: 0xAABBGGRR) at t, with `alpha` 0..255.
uint32_t colormap_u32(Colormap c, float t, int alpha = 255);
// The lookup texture: u8 [kColormapCount, 256, 4] RGBA, one colormap per row.
std::vector<uint8_t> colormap_lut_rgba8();

}  // namespace attn::render
