// Synthetic, deterministic data for every figure preset (no model needed), so golden images
// test the drawing code alone.
#pragma once
#include "app/core/export/figure_data.h"

namespace attn::test {

using core::FigureData;
using core::View;

// A figure of `view` with plausible made-up values: causal heatmaps with a sink column and a
// diagonal, a window variant, a head grid, sinks, an image with a patch grid, a trade-off sweep.
FigureData synthetic_figure(View view);

// The same preset with everything long: 160 tokens with long and odd labels, six panels with
// composite variants of long names and parameters, 12 layers x 12 heads, adjacent sinks, many
// trade-off series (a dense point of error 0 among them), a title and subtitle that wrap.
FigureData long_figure(View view);

}  // namespace attn::test
