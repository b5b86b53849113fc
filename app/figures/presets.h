// One painting function per figure preset; each fills `area` (points) below the title block.
// Internal to app/figures/; figure.cpp dispatches on the view.
#pragma once
#include "app/figures/canvas.h"
#include "app/workbench/figure_data.h"

namespace attn::fig {

void paint_heatmaps(Canvas& c, const QRectF& area, const FigureData& d);
void paint_head_grids(Canvas& c, const QRectF& area, const FigureData& d);
void paint_sinks(Canvas& c, const QRectF& area, const FigureData& d);
void paint_images(Canvas& c, const QRectF& area, const FigureData& d);
void paint_tradeoff(Canvas& c, const QRectF& area, const FigureData& d);
void paint_tokens(Canvas& c, const QRectF& area, const FigureData& d);

// "density 0.23", "output error 0.081", "recall 0.91" for a heatmap panel.
std::vector<QString> metric_segments(const HeatmapData& h);

}  // namespace attn::fig
