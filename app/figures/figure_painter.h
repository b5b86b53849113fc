// FigurePainter and the drawing helpers shared by the figure presets: fonts sized in points on any
// paint device, text anchored at a point, nice axis ticks, thinned token labels, heatmap cells and
// colour bars. Internal to app/figures/.
#pragma once
#include <QColor>
#include <QFont>
#include <QPainter>
#include <QRectF>
#include <QString>
#include <string>
#include <vector>

#include "app/figures/figure.h"
#include "render/colormap.h"

namespace attn::fig {

constexpr QColor kText{25, 25, 25};
constexpr QColor kMuted{95, 95, 95};
constexpr QColor kAxis{45, 45, 45};
constexpr QColor kGrid{225, 225, 225};
constexpr QColor kHidden{242, 242, 242};  // entries the causal rule hides
constexpr QColor kAccent{200, 55, 45};    // highlights (sinks, the query token)

// Qualitative palette for series (trade-off curves, layers).
QColor series_color(int i);

QString qs(const std::string& s);

// A QPainter on an exported figure (PNG, SVG, PDF) with the figure's style: text sized in points,
// lines and outlines. (The interactive view drawn with Vulkan is render::Canvas.)
class FigurePainter {
 public:
  FigurePainter(QPainter& p, const FigureStyle& s) : p_(p), s_(s) {}
  QPainter& painter() { return p_; }
  const FigureStyle& style() const { return s_; }

  // A font of `pt` points in the painter's units (which are points).
  QFont font(double pt, bool bold = false) const;
  double text_width(const QString& t, double pt, bool bold = false) const;
  double line_height(double pt) const;  // ascent + descent
  // Text at `at`: halign -1 left, 0 centre, 1 right of `at`; valign -1 top, 0 middle,
  // 1 baseline-ish bottom; rotated by `deg` (counter-clockwise positive as on screen, -90 reads
  // bottom to top) around `at`.
  void text(QPointF at, const QString& t, double pt, int halign, int valign, QColor c = kText,
            bool bold = false, double deg = 0);
  // Elides to at most `max_w` points with an ellipsis.
  QString elide(const QString& t, double pt, double max_w, bool bold = false) const;
  void line(QPointF a, QPointF b, QColor c = kAxis, double w = -1);
  void rect_outline(const QRectF& r, QColor c = kAxis, double w = -1);

 private:
  QPainter& p_;
  const FigureStyle& s_;
};

// About `max_n` round tick values (steps 1, 2, 5 x 10^k) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int max_n);
// Decades 10^k inside [lo, hi] (lo > 0).
std::vector<double> log_ticks(double lo, double hi);
// Tick label: "0", "0.25", "1e-3", "12k".
QString tick_label(double v);

// Indices of labels to show along `length` points when each needs `each` points.
std::vector<int> thinned(int n, double length, double each);
// Token label for an axis: control characters made visible, at most `max_chars` characters.
QString token_label(const std::string& s, int max_chars = 12);

// Draws a heatmap of f32 [rows, cols] values into `r` with the colour map. `hidden(row, col)`
// (may be null) marks cells to paint kHidden. Many cells become one embedded image.
struct CellSource {
  int rows = 0, cols = 0;
  const std::vector<float>* values = nullptr;
  std::vector<bool> hidden;  // [rows * cols] or empty
};
void draw_cells(FigurePainter& c, const QRectF& r, const CellSource& src, render::Colormap cmap,
                double vmax, bool log_scale);

// Vertical colour bar in `r` with ticks and labels on its right and a rotated title.
// Returns the width used by the labels and title right of `r`.
double draw_colorbar(FigurePainter& c, const QRectF& r, render::Colormap cmap, double vmax,
                     bool log_scale, const QString& title);
// Width a colour bar with its labels and title needs (for layout).
double colorbar_width(const FigurePainter& c);

// Panel caption above a panel: the variant's display name (bold) and its parameters (or
// `fallback` when it has none) on a second, muted line, both elided to `width`. The text sits
// in [top_left.y, top_left.y + caption_height()).
void draw_caption(FigurePainter& c, QPointF top_left, double width, const std::string& spec,
                  const QString& fallback = {});
double caption_height(const FigurePainter& c);
// Segments joined by " · " on at most `max_lines` lines of `width` points; returns the lines.
std::vector<QString> wrap_segments(const FigurePainter& c, const std::vector<QString>& segments,
                                   double pt, double width, int max_lines);

// Title block: title and subtitle at the top of `area`; returns the height used.
double draw_title(FigurePainter& c, const QRectF& area, const std::string& title,
                  const std::string& subtitle);

}  // namespace attn::fig
