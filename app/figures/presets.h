// One painting function per figure preset; each draws into `area` (points) below the title
// block and returns the lowest y it drew at (so a figure can be cropped to its content). On a
// page (FigurePainter::free_height() false) a preset fits `area` and uses it; at a free height it
// takes the height its content needs. Internal to app/figures/; figure.cpp dispatches on the view.
#pragma once
#include "app/core/export/figure_data.h"
#include "app/figures/figure_painter.h"

namespace attn::fig {

double paint_heatmaps(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_head_grids(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_sinks(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_images(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_tradeoff(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_tokens(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_stream(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_cache(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_decode(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_value_grids(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_attribution(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_qk(FigurePainter& c, const QRectF& area, const FigureData& d);
double paint_steps(FigurePainter& c, const QRectF& area, const FigureData& d);

// "density 0.23", "error 0.081", "recall 0.91", "row KL 0.12", "1 sink" for a heatmap panel: the
// head's own values (core::heatmap_header()).
std::vector<QString> metric_segments(const HeatmapData& h);

}  // namespace attn::fig
