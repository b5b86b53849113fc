// Colours of the Attribution view (render/attribution_view.cpp, attribution_charts.cpp): signed
// scores on a diverging scale that reads in both themes, overlays on images, and one categorical
// colour per method shared by the rows' swatches, the agreement matrix and the curves.
#pragma once
#include <imgui.h>

#include <cstddef>

namespace attn::render {

struct AttributionFill {
  ImU32 fill = 0;  // the cell's colour
  ImU32 text = 0;  // a text colour readable on it
};
// x in [-1, 1] (a score over its method's largest |score|; NaN as 0). Light theme: ColorBrewer
// RdBu (blue, white, red) as it is; dark theme: from the background `bg` (RGBA 0..1) to the
// map's saturated red or blue, so that a stronger score always stands out more.
AttributionFill attribution_fill(float x, bool dark, const float bg[4]);
// The same scale over an image: saturated red or blue, opacity growing with |x|.
ImU32 attribution_overlay(float x);
// Method i's colour (Tableau 10, cycled).
ImU32 attribution_color(size_t i);
// The random orders' colour (grey).
ImU32 attribution_random_color(bool dark);

}  // namespace attn::render
