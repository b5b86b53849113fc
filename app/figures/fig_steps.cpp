// Preset "steps": one head's arithmetic on a short input, stage by stage
// (app/core/teaching/head_steps.h), as three rows of small labelled matrices with their numbers
// printed in the cells: X -> Q, K, V; Q K^T -> scaled -> masked -> softmax; weights x V -> out W_o.
// Signed stages are blue below zero and red above (each on its own scale), the weights a
// sequential blue on [0, 1], masked-out entries the figures' dropped colour with a cross. A
// followed query (and the key it weighs most) is outlined in every stage.
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {
namespace {

constexpr double kArrow = 16;  // points between two stages of a row
constexpr int kMaxDims = 8;    // dimension columns printed before "..."

QColor cell_color(const core::StepStage& m, float v, float vmax) {
  const bool weights = m.id == "weights";
  const render::Rgb8 c =
      weights ? render::colormap_rgb8(render::Colormap::Blues, double(v))
              : render::colormap_rgb8(render::Colormap::Diverging, 0.5 + 0.5 * double(v) / vmax);
  return QColor(c.r, c.g, c.b);
}

QColor ink_on(const QColor& c) {
  return 0.299 * c.red() + 0.587 * c.green() + 0.114 * c.blue() > 140 ? kText
                                                                      : QColor(250, 250, 250);
}

QString value_text(const FigurePainter& c, float v, double width, double pt) {
  for (int dec : {2, 1, 0}) {
    const QString s = num_fixed(double(v), dec);
    if (c.text_width(s, pt) <= width - 1.5) return s;
  }
  return {};
}

struct Grid {
  double x = 0, y = 0, cw = 0, ch = 0;
  int shown = 0;
  bool cut = false;
};

// Columns shown and cell width of stage `m` in `width` points.
Grid plan(const core::StepStage& m, double width, double ch) {
  Grid g;
  g.ch = ch;
  g.shown = m.key_columns ? m.cols : std::min(m.cols, kMaxDims);
  g.cut = g.shown < m.cols;
  g.cw = width / double(g.shown + (g.cut ? 1 : 0));
  return g;
}

// Title, shape and the grid of stage `m` at (x, y): returns the grid's placement.
Grid draw_stage(FigurePainter& c, const core::StepStage& m, double x, double y, double width,
                double ch, int query, int key) {
  const FigureStyle& s = c.style();
  const double cell_pt = std::max(4.0, std::min(s.tick_pt - 1.0, ch * 0.62));
  c.text({x, y}, qs(m.title), s.label_pt, -1, -1, kText, true, 0, width);
  y += c.line_height(s.label_pt);
  const std::string shape = "[" + std::to_string(m.rows) + " \u00d7 " + std::to_string(m.cols) +
                            "]" + (m.hook.empty() ? "" : "  " + m.hook);
  c.text({x, y}, qs(shape), s.tick_pt - 0.5, -1, -1, kMuted, false, 0, width);
  y += c.line_height(s.tick_pt - 0.5) + 1;
  Grid g = plan(m, width, ch);
  // Column labels: dims, or the keys' first characters.
  const double col_h = c.line_height(cell_pt) + 1;
  for (int col = 0; col < g.shown; ++col) {
    const QString lab = QString::number(col);  // key positions or dimensions
    if (c.text_width(lab, cell_pt) > g.cw && col % 2) continue;
    c.text({x + g.cw * (col + 0.5), y}, lab, cell_pt, 0, -1,
           m.key_columns && col == key ? kAccent : kMuted, false, 0, g.cw * 2);
  }
  if (g.cut) c.text({x + g.cw * (g.shown + 0.5), y}, "\u2026", cell_pt, 0, -1, kMuted);
  y += col_h;
  g.x = x;
  g.y = y;
  float vmax = 0;
  for (size_t e = 0; e < m.values.size(); ++e)
    if (m.dropped.empty() || !m.dropped[e]) vmax = std::max(vmax, std::abs(m.values[e]));
  if (vmax <= 0) vmax = 1;
  QPainter& p = c.painter();
  for (int r = 0; r < m.rows; ++r)
    for (int col = 0; col < g.shown; ++col) {
      const QRectF cell(x + g.cw * col, y + ch * r, g.cw, ch);
      const bool drop = m.is_dropped(r, col);
      const bool causal = drop && m.dropped[m.index(r, col)] == 1;
      const QColor fill = causal ? kHidden : drop ? kDropped : cell_color(m, m.at(r, col), vmax);
      p.fillRect(cell, fill);
      const QString t = causal ? QString()
                        : drop ? QString("\u00d7")
                               : value_text(c, m.at(r, col), g.cw, cell_pt);
      if (!t.isEmpty() && ch >= c.line_height(cell_pt) * 0.9)
        c.text(cell.center(), t, cell_pt, 0, 0, drop ? kMuted : ink_on(fill), false, 0, g.cw);
    }
  if (g.cut)
    for (int r = 0; r < m.rows; ++r)
      c.text({x + g.cw * (g.shown + 0.5), y + ch * (r + 0.5)}, "\u2026", cell_pt, 0, 0, kMuted);
  const QRectF frame(x, y, g.cw * g.shown, ch * m.rows);
  c.rect_outline(frame);
  // The followed query's row (the key's row in K and V) and their cell.
  const int row = (m.id == "k" || m.id == "v") ? key : query;
  if (row >= 0 && row < m.rows)
    c.rect_outline(QRectF(x, y + ch * row, g.cw * g.shown, ch), kAccent, m.key_columns ? 0.8 : 1.2);
  if (m.key_columns && query >= 0 && key >= 0)
    c.rect_outline(QRectF(x + g.cw * key, y + ch * query, g.cw, ch), kAccent, 1.6);
  return g;
}

void arrow(FigurePainter& c, double x, double y) {
  c.line({x + 3, y}, {x + kArrow - 4, y}, kMuted, 0.9);
  c.line({x + kArrow - 7, y - 2.5}, {x + kArrow - 4, y}, kMuted, 0.9);
  c.line({x + kArrow - 7, y + 2.5}, {x + kArrow - 4, y}, kMuted, 0.9);
}

}  // namespace

double paint_steps(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const core::HeadSteps& s = d.steps.steps;
  const FigureStyle& st = c.style();
  if (s.stages.empty()) return area.top();
  const int n = s.n, q = d.steps.query, k = d.steps.key;
  double label_w = 0;
  for (const std::string& t : s.tokens)
    label_w = std::max(label_w, c.text_width(token_label(t, 14), st.tick_pt - 0.5));
  label_w += 4;
  const double head_h = c.line_height(st.label_pt) + c.line_height(st.tick_pt - 0.5) + 1 +
                        c.line_height(std::max(4.0, st.tick_pt - 1.0)) + 1;
  double ch = 11;
  if (!c.free_height()) ch = std::clamp((area.height() - 3 * head_h - 40) / (3.0 * n), 4.0, 11.0);
  const std::vector<std::vector<const char*>> rows = {
      {"x", "q", "k", "v"}, {"scores", "scaled", "masked", "weights"}, {"out", "proj"}};
  double y = area.top();
  for (size_t r = 0; r < rows.size(); ++r) {
    const double share =
        (area.width() - label_w - kArrow * 3) / 4.0;  // every row on the same column widths
    double x = area.left() + label_w;
    double grid_y = y;
    for (size_t i = 0; i < rows[r].size(); ++i) {
      const core::StepStage& m = s.stage(rows[r][i]);
      const Grid g = draw_stage(c, m, x, y, share, ch, q, k);
      grid_y = g.y;
      if (i + 1 < rows[r].size()) arrow(c, x + share, g.y + ch * n / 2);
      x += share + kArrow;
    }
    for (int t = 0; t < n; ++t)
      c.text({area.left() + label_w - 3, grid_y + ch * (t + 0.5)},
             token_label(s.tokens[size_t(t)], 14), st.tick_pt - 0.5, 1, 0, t == q ? kAccent : kText,
             false, 0, label_w);
    if (r == 2) {
      // The key to the colours and marks, beside the output row.
      const double lx = x + 4, lw = area.right() - lx;
      std::vector<QString> key_lines = {
          "Colours: blue < 0 < red, each stage on its own scale; weights on a blue scale from 0 "
          "to 1.",
          "Grey: the future, which the causal mask hides; \u00d7: an entry the variant drops "
          "(weight 0).",
          "Numbers are the forward pass's hooks (Q, K, V, scaled, weights, out); QK\u1d40 and out "
          "W_o "
          "are computed from them. Wide matrices show their first " +
              QString::number(kMaxDims) + " dimensions."};
      if (q >= 0)
        key_lines.push_back("Outlined: query " + token_label(s.tokens[size_t(q)], 14) +
                            " and the key it weighs most, " + token_label(s.tokens[size_t(k)], 14) +
                            ", through every stage.");
      double ty = grid_y;
      for (const QString& l : key_lines)
        ty += draw_lines(c, {lx, ty}, wrap_text(c, l, st.tick_pt, lw), st.tick_pt, -1, kMuted,
                         false, lw) +
              2;
    }
    y = grid_y + ch * n + 10;
  }
  return y - 10;
}

}  // namespace attn::fig
