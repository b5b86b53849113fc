// Publication figures: each view of FigureData (app/core/export/figure_data.h) painted with
// QPainter in points (1/72 inch) onto PNG (QImage at a chosen size and DPI), SVG (QSvgGenerator:
// text stays text, heatmap cells are rectangles, or one embedded full-resolution image for
// very large maps) or PDF (QPdfWriter: one page of the requested size). Everything here is in
// attn::fig, like the painters behind it.
//
//   FigureData d = core::collect_figure(*analysis, View::Variants);
//   fig::export_figure(d, "fig.pdf", {2100, 1350, 300});           // 7 x 4.5 in
//   fig::write_sidecar(analysis->session, "s.attnscope.json", "fig.pdf", View::Variants, size);
//
// Painting needs a QGuiApplication; ensure_gui_app() makes an offscreen one when none exists.
#pragma once
#include <QImage>
#include <QPainter>
#include <QRectF>
#include <QString>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/export/figure_data.h"
#include "app/core/session/labels.h"
#include "app/core/session/session.h"

namespace attn::fig {

// The figures paint the core's plain view structs.
using core::CacheFigure;
using core::CacheTimeline;
using core::FigureData;
using core::FigureSize;
using core::HeadGrid;
using core::HeatmapData;
using core::ImageAttention;
using core::Session;
using core::SinkData;
using core::StreamCurve;
using core::StreamFigure;
using core::TokensData;
using core::TradeoffPoint;
using core::View;

// Typography and line weights shared by every preset.
struct FigureStyle {
  QString family = "DejaVu Sans";
  double title_pt = 9.5;           // figure title
  double label_pt = 8;             // axis titles, panel captions
  double tick_pt = 6.5;            // tick and token labels
  double line_pt = 0.5;            // axis and tick lines
  double margin_pt = 6;            // outer margin
  int max_rect_cells = 128 * 128;  // above this a heatmap is drawn as one embedded image
};

enum class FigureFormat { Png, Svg, Pdf };
// From the file extension (.png, .svg, .pdf; case-insensitive); throws Error(InvalidArgument).
FigureFormat figure_format(const std::string& path);
// Everything about `path` that can be checked before any work: a known extension (else
// Error(InvalidArgument)) and an existing, writable folder (else Error(Io) naming the path).
void check_figure_path(const std::string& path);

// Throws Error(InvalidArgument) naming a colour map, grid metric or trade-off axis of `d`'s
// settings that no figure knows (paint_figure and the exports check this before painting).
void check_figure_settings(const FigureData& d);

// One piece of text a figure drew, in points on the page.
struct DrawnText {
  QString text;
  QRectF box;         // its bounds on the page (rotated text: the rotated box's bounds)
  double length = 0;  // its extent along the baseline
  double room = -1;   // the extent the layout allotted it (-1: none; the page bounds it)
};
// A data mark (bar, point) and the axes box that must hold it.
struct DrawnMark {
  QRectF mark, axes;
};
// What a figure drew, for layout checks: every text box (none may be cut by the page or by its
// room, none may overlap another) and every data mark (each inside its axes).
struct FigureLayout {
  QRectF page;
  std::vector<DrawnText> texts;
  std::vector<DrawnMark> marks;
};

// Paints `d` into the rectangle [0, w_pt] x [0, h_pt] of the painter's current coordinates;
// returns the height its content needed (points, bottom margin included). h_pt <= 0 lays the
// content out at its natural height (what fit_height() measures) without filling a page.
// `layout` (may be null) receives what was drawn.
double paint_figure(QPainter& p, const FigureData& d, double w_pt, double h_pt,
                    const FigureStyle& style = {}, FigureLayout* layout = nullptr);

// `size` with height 0 replaced by the height the content needs at that width (heatmaps, grids,
// images and tokens are as tall as their panels; sinks rows and trade-off plots get a height in
// proportion to their width).
FigureSize fit_height(const FigureData& d, FigureSize size, const FigureStyle& style = {});

// The figure as a QImage of size.width x size.height pixels, with size.dpi as its resolution
// (height 0: fit_height()). `layout` (may be null) receives what was drawn, in points.
QImage render_figure_image(const FigureData& d, const FigureSize& size,
                           const FigureStyle& style = {}, FigureLayout* layout = nullptr);

// Writes PNG, SVG or PDF (by extension) of physical size width/dpi x height/dpi inches.
// Throws Error(Io) naming the file when it cannot be written (Qt prints nothing).
void export_figure(const FigureData& d, const std::string& path, const FigureSize& size,
                   const FigureStyle& style = {});

// Path of the sidecar of a figure: "<figure path>.attnscope.json".
std::string sidecar_path(const std::string& figure_path);
// Writes the session that regenerates the figure (with its view and size) as the sidecar;
// relative paths of `s` (read from `session_path`) are rewritten relative to the sidecar.
void write_sidecar(const Session& s, const std::string& session_path,
                   const std::string& figure_path, View view, const FigureSize& size);

// Export of a view in one call: collects `view` from a finished analysis, writes the figure
// and its sidecar (the analysis's session with file hashes). Returns the size written (height
// 0 resolved). Throws attn::Error.
FigureSize export_view(const core::Analysis& a, View view, const std::string& path,
                       FigureSize size);

// Creates a QGuiApplication on the offscreen platform when none exists (CLI, tests). Safe to
// call many times; the application lives until the process exits.
void ensure_gui_app();

}  // namespace attn::fig
