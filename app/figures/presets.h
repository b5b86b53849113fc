// One painting function per figure preset; each draws into `area` (points) below the title
// block and returns the lowest y it drew at (so a figure can be cropped to its content).
// Internal to app/figures/; figure.cpp dispatches on the view.
#pragma once
#include "app/figures/canvas.h"
#include "app/core/figure_data.h"

namespace attn::fig {

double paint_heatmaps(Canvas& c, const QRectF& area, const FigureData& d);
double paint_head_grids(Canvas& c, const QRectF& area, const FigureData& d);
double paint_sinks(Canvas& c, const QRectF& area, const FigureData& d);
double paint_images(Canvas& c, const QRectF& area, const FigureData& d);
double paint_tradeoff(Canvas& c, const QRectF& area, const FigureData& d);
double paint_tokens(Canvas& c, const QRectF& area, const FigureData& d);

// "density 0.23", "output error 0.081", "recall 0.91" for a heatmap panel.
std::vector<QString> metric_segments(const HeatmapData& h);

}  // namespace attn::fig
