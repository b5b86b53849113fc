// The one colour-map table of attnscope, shared by the renderer (lookup texture, ImGui views)
// and the publication figures, so a map named in a session draws the same everywhere. No Vulkan,
// ImGui or Qt here: the figures link it without the renderer (library attn_colormap).
//
// Maps are piecewise linear in sRGB between evenly spaced anchors, so a vector gradient with the
// same stops (colour bars in SVG/PDF) reproduces them exactly. The perceptual maps are samples of
// matplotlib's 256-entry tables (van der Walt & Smith; cividis: Nunez et al. 2018).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attn::render {

// Table order; also the row of the lookup texture.
enum class Colormap {
  Viridis = 0,
  Magma,
  Inferno,
  Plasma,
  Cividis,
  Gray,       // white (0) to black (1), for print
  Blues,      // ColorBrewer Blues: near white to dark blue
  Diverging,  // ColorBrewer RdBu reversed: blue (0), white (0.5), red (1); for differences
};
constexpr int kColormapCount = 8;

struct Rgb {
  float r = 0, g = 0, b = 0;  // 0..1
};
struct Rgb8 {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb8&) const = default;
};

// Entries a variant dropped (or a cache evicted), in the GUI's heatmaps and the figures: a light
// orchid that no map above has (over 90 apart in RGB from every colour of every map but
// Diverging), so that it never reads as a small probability.
constexpr Rgb8 kDroppedRgb{220, 120, 240};

// Names in table order: "viridis", "magma", "inferno", "plasma", "cividis", "gray", "blues",
// "diverging". These are what sessions (ViewSettings::colormap) and the CLI spell.
const std::vector<std::string>& colormap_names();
const char* colormap_name(Colormap c);
// The map called `name` (a session's colormap string); throws Error(InvalidArgument) listing
// every name.
Colormap colormap_from_name(const std::string& name);

// Colour at t in [0, 1] (clamped; NaN gives the colour at 0).
Rgb colormap_rgb(Colormap c, double t);
Rgb8 colormap_rgb8(Colormap c, double t);
// ImGui-packed colour (IM_COL32 layout: 0xAABBGGRR) at t, with `alpha` 0..255.
uint32_t colormap_u32(Colormap c, double t, int alpha = 255);
// The anchors of a map, evenly spaced over [0, 1] (stops of a vector gradient).
std::vector<Rgb8> colormap_stops(Colormap c);
// The lookup texture: u8 [kColormapCount, 256, 4] RGBA, row = int(Colormap).
std::vector<uint8_t> colormap_lut_rgba8();

// Where value v falls on the colour scale [0, vmax]: linear, or log10 over [vmax * 1e-4, vmax].
double color_position(double v, double vmax, bool log_scale);

// The colour scale of a set of values (head grids in the app and the figures): their real range,
// or [0, 1] when `unit` is asked for. A range below float noise (spread <= 1e-6 x max(1, |value|))
// is `flat`: one colour, with a note saying so, instead of stretching noise over the whole map.
// Labels carry as many digits as it takes to tell lo from hi.
struct ValueRange {
  double lo = 0, hi = 1;
  bool flat = false;
  std::string lo_label, hi_label;
  std::string note;  // empty, or why the scale is flat
  // Position of v on the scale, in [0, 1] (0.5 for every value of a flat range; NaN stays NaN).
  double position(double v) const;
};
ValueRange value_range(const std::vector<float>& values, bool unit = false);

}  // namespace attn::render
