// Colours of pooled attention cells, computed on the CPU whenever tiles or display settings
// change (not per frame): the GPU then only samples an RGBA8 texture, which software Vulkan
// (lavapipe) draws several times faster than colormapping float textures per fragment.
#pragma once
#include <cstdint>
#include <vector>

#include "render/document.h"
#include "render/view_settings.h"

namespace attn::render {

struct ColorScale {
  DisplayMode mode = DisplayMode::Probabilities;
  Colormap colormap = Colormap::Viridis;
  bool log_scale = true;
  float log_floor = 1e-4f;
  float vmax = 1;  // top of the probability scale (shared by the panels)
  float dmax = 1;  // top of the |difference| scale
  bool operator==(const ColorScale&) const = default;
};

// Position in [0, 1] of probability `v` on the scale.
float scale_position(const ColorScale& s, float v);

// RGBA8 [tile.h, tile.w, 4] for the tile under the scale. Probability mode paints cells with
// visible entries and none kept in kDroppedRgb (outside every map). Kept-set mode shows the dense
// probabilities where the variant computed them and a dark-to-red ramp (dropped mass) elsewhere;
// difference mode shows variant - dense on the diverging map.
void colorize(const PanelTile& tile, const ColorScale& s, std::vector<uint8_t>& rgba);

}  // namespace attn::render
