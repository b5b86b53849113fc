// Colour maps for attention figures: piecewise linear in sRGB between a few anchor colours, so a
// vector gradient with the same stops reproduces them exactly (colour bars in SVG/PDF).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace attn {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

struct Colormap {
  std::string name;
  std::vector<Rgb> stops;  // evenly spaced over [0, 1], low to high
  // Colour of t in [0, 1] (clamped; NaN gives the lowest colour).
  Rgb at(double t) const;
};

// "viridis" (default), "magma", "gray" (white to black), "blues"; throws Error(InvalidArgument)
// listing the names.
const Colormap& colormap(const std::string& name);
const std::vector<std::string>& colormap_names();

// Where value v falls on the colour scale [0, vmax]: linear, or log10 over [vmax * 1e-4, vmax].
double color_position(double v, double vmax, bool log_scale);

}  // namespace attn
