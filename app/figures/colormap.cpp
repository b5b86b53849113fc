#include "app/figures/colormap.h"

#include <algorithm>
#include <cmath>

#include "compute/error.h"

namespace attn {

Rgb Colormap::at(double t) const {
  if (!(t > 0)) return stops.front();
  if (t >= 1) return stops.back();
  const double x = t * double(stops.size() - 1);
  const size_t i = size_t(x);
  const double f = x - double(i);
  const Rgb& a = stops[i];
  const Rgb& b = stops[std::min(i + 1, stops.size() - 1)];
  auto mix = [f](uint8_t u, uint8_t v) { return uint8_t(std::lround(u + (v - u) * f)); };
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

const std::vector<std::string>& colormap_names() {
  static const std::vector<std::string> names = {"viridis", "magma", "gray", "blues"};
  return names;
}

const Colormap& colormap(const std::string& name) {
  // Anchor colours of the perceptually uniform maps (viridis and magma stops at equal spacing).
  static const std::vector<Colormap> maps = {
      {"viridis",
       {{68, 1, 84},
        {72, 40, 120},
        {62, 74, 137},
        {49, 104, 142},
        {38, 130, 142},
        {31, 158, 137},
        {53, 183, 121},
        {110, 206, 88},
        {181, 222, 43},
        {253, 231, 37}}},
      {"magma",
       {{0, 0, 4},
        {28, 16, 68},
        {79, 18, 123},
        {129, 37, 129},
        {181, 54, 122},
        {229, 80, 100},
        {251, 135, 97},
        {254, 194, 135},
        {252, 253, 191}}},
      {"gray", {{255, 255, 255}, {0, 0, 0}}},
      {"blues", {{247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}}},
  };
  for (const Colormap& m : maps)
    if (m.name == name) return m;
  throw Error(ErrorCode::InvalidArgument,
              "unknown colour map '" + name + "' (known: viridis, magma, gray, blues)");
}

double color_position(double v, double vmax, bool log_scale) {
  if (!(vmax > 0) || !std::isfinite(v)) return 0;
  if (!log_scale) return std::clamp(v / vmax, 0.0, 1.0);
  const double lo = vmax * 1e-4;
  if (v <= lo) return 0;
  return std::clamp(std::log10(v / lo) / 4.0, 0.0, 1.0);
}

}  // namespace attn
