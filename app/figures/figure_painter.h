// FigurePainter and the drawing helpers shared by the figure presets: fonts sized in points on any
// paint device, text anchored at a point (every box recorded for the layout checks), wrapped
// lines, round axis ticks, thinned token labels, heatmap cells, colour bars, captions and legends.
// Internal to app/figures/.
//
// Layout rule of every preset: text is never cut. The layout gives each text the room it needs,
// wraps it onto more lines, or shortens it deliberately (token labels); the layout test
// (tests/app/test_figures.cpp) checks the recorded boxes against the page, their room and
// each other.
#pragma once
#include <QColor>
#include <QFont>
#include <QPainter>
#include <QRectF>
#include <QString>
#include <QTransform>
#include <functional>
#include <string>
#include <vector>

#include "app/figures/figure.h"
#include "render/colormap.h"

namespace attn::fig {

constexpr QColor kText{25, 25, 25};
constexpr QColor kMuted{95, 95, 95};
constexpr QColor kAxis{45, 45, 45};
constexpr QColor kGrid{225, 225, 225};
constexpr QColor kHidden{242, 242, 242};  // entries the causal rule hides (and future steps)
// Entries a variant dropped (or a cache evicted): a colour no colour map has (its nearest
// colour in any map is over 90 apart in RGB), so a dropped entry never reads as a small
// probability; the GUI's heatmap uses the same (render::kDroppedRgb).
constexpr QColor kDropped{render::kDroppedRgb.r, render::kDroppedRgb.g, render::kDroppedRgb.b};
constexpr QColor kAccent{200, 55, 45};  // highlights (sinks, the query token)

// Qualitative palette for series (trade-off curves, layers).
QColor series_color(int i);

QString qs(const std::string& s);
// Numbers in figures (render/number_format.h): no "-0.00", and 0 below the resolution.
QString num_fixed(double x, int decimals);
QString num_sig(double x, int digits, double resolution = 1e-9);

// A QPainter on an exported figure (PNG, SVG, PDF) with the figure's style: text sized in points,
// lines and outlines. (The interactive view drawn with Vulkan is render::Canvas.)
class FigurePainter {
 public:
  // `record` (may be null) receives every text box and data mark, in page points.
  // `free_height`: the figure is laid out at its natural height (fit_height) instead of filling
  // the page it is given.
  FigurePainter(QPainter& p, const FigureStyle& s, FigureLayout* record = nullptr,
                bool free_height = false);
  QPainter& painter() { return p_; }
  const FigureStyle& style() const { return s_; }
  bool free_height() const { return free_height_; }

  // A font of `pt` points in the painter's units (which are points).
  QFont font(double pt, bool bold = false) const;
  double text_width(const QString& t, double pt, bool bold = false) const;
  double line_height(double pt) const;  // ascent + descent
  // Text at `at`: halign -1 left, 0 centre, 1 right of `at`; valign -1 top, 0 middle,
  // 1 bottom; rotated by `deg` (counter-clockwise positive as on screen, -90 reads bottom to
  // top) around `at`. `room`: the length the layout allotted it along its baseline (recorded;
  // the text is drawn whole either way).
  void text(QPointF at, const QString& t, double pt, int halign, int valign, QColor c = kText,
            bool bold = false, double deg = 0, double room = -1);
  void line(QPointF a, QPointF b, QColor c = kAxis, double w = -1);
  void rect_outline(const QRectF& r, QColor c = kAxis, double w = -1);
  // Records a data mark (bar, point) that must lie inside `axes`.
  void mark(const QRectF& m, const QRectF& axes);

 private:
  QPainter& p_;
  const FigureStyle& s_;
  FigureLayout* record_;
  bool free_height_;
  QTransform to_page_;  // device coordinates -> page points
};

// ---- text ---------------------------------------------------------------------------------------
// `t` broken at spaces into lines of at most `width` points; a word longer than a line is broken
// after a hyphen, slash, comma or underscore, else between letters with a hyphen added. At least
// one line.
std::vector<QString> wrap_text(const FigurePainter& c, const QString& t, double pt, double width,
                               bool bold = false);
// Segments joined by " · " on as many lines of `width` points as they need (a segment longer than
// a line is wrapped itself).
std::vector<QString> wrap_segments(const FigurePainter& c, const std::vector<QString>& segments,
                                   double pt, double width);
// Lines from `at` downwards, each line_height(pt) below the last, aligned by `halign` around
// at.x; each is given `room`. Returns the height drawn.
double draw_lines(FigurePainter& c, QPointF at, const std::vector<QString>& lines, double pt,
                  int halign, QColor col, bool bold, double room);
// Lines reading bottom to top, centred on y = `at`.y, stacked rightwards from x = `at`.x; each
// is given `room` (the length of the axis they name).
void draw_vertical_lines(FigurePainter& c, QPointF at, const std::vector<QString>& lines, double pt,
                         QColor col, double room);

// Token label for an axis: control characters made visible, at most `max_chars` characters (a
// deliberate shortening, ending in an ellipsis).
QString token_label(const std::string& s, int max_chars = 12);

// ---- axes ---------------------------------------------------------------------------------------
// Round ticks (steps 1, 2, 5 x 10^k) inside [lo, hi], about `max_n` of them.
std::vector<double> nice_ticks(double lo, double hi, int max_n);
// Round ticks (steps 1, 2, 5 x 10^k) spanning [lo, hi]: the first <= lo, the last >= hi; at
// most `max_n` (>= 2) of them.
std::vector<double> cover_ticks(double lo, double hi, int max_n);
// Decades 10^k inside [lo, hi] (lo > 0).
std::vector<double> log_ticks(double lo, double hi);
// Tick label: "0", "0.25", "10⁻³", "2×10⁴".
QString tick_label(double v);
// Indices of labels to show along `length` points when each needs `each` points.
std::vector<int> thinned(int n, double length, double each);

// ---- panels -------------------------------------------------------------------------------------
// Columns for `k` panels: with a free height one row of up to four (else two rows); on a page
// the count whose panels come out largest, by `side(columns)`.
int choose_columns(const FigurePainter& c, int k, const std::function<double(int)>& side);

// Draws a heatmap of f32 [rows, cols] values into `r` with the colour map. `hidden(row, col)`
// (may be null) marks cells to paint kHidden. Many cells become one embedded image.
struct CellSource {
  int rows = 0, cols = 0;
  const std::vector<float>* values = nullptr;
  std::vector<bool> hidden;      // [rows * cols] or empty: painted kHidden
  std::vector<uint8_t> dropped;  // [rows * cols] or empty: nonzero painted kDropped
};
void draw_cells(FigurePainter& c, const QRectF& r, const CellSource& src, render::Colormap cmap,
                double vmax, bool log_scale);

// A vertical colour bar with ticks and labels on its right and its title, reading bottom to top,
// right of those: centred on the bar and wrapped onto more lines when longer than `title_room`
// (the bar's height when less: the free length the layout leaves beside the bar).
struct Colorbar {
  render::Colormap cmap = render::Colormap::Viridis;
  double vmax = 1;
  bool log_scale = false;
  QString title;
};
constexpr double kColorbarGap = 10;  // between the panels and the bar
constexpr double kColorbarBar = 8;   // the bar's width
// Width of the bar with its labels and title when the bar is `height` points tall.
double colorbar_width(const FigurePainter& c, const Colorbar& b, double height,
                      double title_room = 0);
// Draws the bar in `r` (kColorbarBar wide); labels and title go right of it.
void draw_colorbar(FigurePainter& c, const QRectF& r, const Colorbar& b, double title_room = 0);

// Panel caption: the variant's display name (bold) and its parameters (or `fallback` when it has
// none, muted), each wrapped to the panel's width.
struct Caption {
  std::vector<QString> name, params;
};
Caption make_caption(const FigurePainter& c, const std::string& spec, const QString& fallback,
                     double width);
// A caption from plain text: `name` (bold) over `sub` (muted).
Caption text_caption(const FigurePainter& c, const QString& name, const QString& sub, double width);
// Height of a caption and the gap under it.
double caption_height(const FigurePainter& c, const Caption& cap);
void draw_caption(FigurePainter& c, QPointF top_left, double width, const Caption& cap);

// Legend entries flowed left to right, wrapping onto more lines.
struct LegendItem {
  enum Kind { Swatch, Dashed, Marker } kind = Swatch;
  QColor color;
  int shape = 0;  // Marker: draw_marker's shape
  QString text;
};
// Lays out (and, when `draw`, draws) the legend in `width` points from `top_left`; returns its
// height.
double draw_legend(FigurePainter& c, QPointF top_left, double width,
                   const std::vector<LegendItem>& items, bool draw = true);
// Marker of a series: 0 circle, 1 square, 2 triangle, 3 diamond (then again).
void draw_marker(QPainter& p, QPointF at, int shape, QColor col, double r);

// Title block: title and subtitle at the top of `area`, wrapped to its width; returns the height
// used.
double draw_title(FigurePainter& c, const QRectF& area, const std::string& title,
                  const std::string& subtitle, bool draw = true);

}  // namespace attn::fig
