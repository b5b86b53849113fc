// Preset "tokens": the input text as token boxes shaded by the attention one query gives them,
// one paragraph per variant; the query token is outlined. When the page is too short for every
// token, each paragraph shows what fits and ends with "+N more".
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {
namespace {

struct Placed {
  int row = 0;
  double x = 0, w = 0;
  QString label;
};

struct Paragraph {
  std::vector<QString> caption;
  std::vector<Placed> boxes;  // the tokens shown
  int rows = 0;
  QString more;  // "+N more" when tokens were left out
  double more_x = 0;
};

// Token boxes: text a little larger than tick labels, so the paragraph reads as text.
struct TokenStyle {
  double tok_pt = 0, box_h = 0, row_gap = 2.2, pad = 1.6, tok_gap = 1.2, para_gap = 7;
  double lh_label = 0;  // caption line height
  double row_pitch() const { return box_h + row_gap; }
  double height(const Paragraph& p) const {
    return double(p.caption.size()) * lh_label + 3 + p.rows * row_pitch() + para_gap;
  }
};

// Tokens flowed into rows of `width`; at most `max_rows` rows, the last keeping room for
// "+N more" when not every token fits.
Paragraph flow(FigurePainter& c, const TokensData& t, const TokenStyle& ts, double width,
               int max_rows) {
  const FigureStyle& s = c.style();
  const double pad = ts.pad, tok_gap = ts.tok_gap;
  Paragraph p;
  p.caption = wrap_text(c, qs(t.caption), s.label_pt, width, true);
  const int n = int(t.labels.size());
  const QString more_max = QString("+%1 more").arg(n);
  const double more_w = c.text_width(more_max, s.tick_pt) + tok_gap;
  double x = 0;
  int row = 0;
  for (int j = 0; j < n; ++j) {
    // Labels are shortened deliberately: at most 24 characters, fewer on a narrow page.
    QString lab = token_label(t.labels[size_t(j)], 24);
    for (int chars = 23; chars >= 2 && c.text_width(lab, ts.tok_pt) + 2 * pad > width; --chars)
      lab = token_label(t.labels[size_t(j)], chars);
    const double w = c.text_width(lab, ts.tok_pt) + 2 * pad;
    if (x + w > width && x > 0) {
      ++row;
      x = 0;
    }
    const bool last_row = row == max_rows - 1;
    const bool others = j + 1 < n;
    if (row >= max_rows || (last_row && others && x + w + tok_gap + more_w > width)) {
      p.more = QString("+%1 more").arg(n - j);
      p.more_x = x;
      if (row >= max_rows) {  // the marker goes at the end of the last row
        row = max_rows - 1;
        p.more_x = p.boxes.empty() ? 0 : p.boxes.back().x + p.boxes.back().w + tok_gap;
      }
      break;
    }
    p.boxes.push_back({row, x, w, lab});
    x += w + tok_gap;
  }
  p.rows = std::max(1, row + 1);
  return p;
}

// A page too short for every token: the longest paragraphs give up rows, one at a time, until
// the page holds them all; each then shows what fits in its rows and says how many it left out.
// Returns the paragraphs' new height.
double shorten(FigurePainter& c, const FigureData& d, const TokenStyle& ts, double width,
               double natural, double page_h, std::vector<Paragraph>& paras) {
  std::vector<int> rows;
  for (const Paragraph& p : paras) rows.push_back(p.rows);
  double over = natural - ts.para_gap - page_h;
  while (over > 0) {
    const auto most = std::max_element(rows.begin(), rows.end());
    if (*most <= 1) break;
    --*most;
    over -= ts.row_pitch();
  }
  natural = 0;
  for (size_t k = 0; k < paras.size(); ++k) {
    if (rows[k] < paras[k].rows) paras[k] = flow(c, d.tokens[k], ts, width, rows[k]);
    natural += ts.height(paras[k]);
  }
  return natural;
}

// One paragraph from `top`: its caption, then its token boxes shaded by the query's attention
// (the query outlined, tokens after it blank) and "+N more" when some were left out.
void draw_paragraph(FigurePainter& c, const TokensData& t, const Paragraph& p, const TokenStyle& ts,
                    double left, double top, double width, const Colorbar& cb) {
  const FigureStyle& s = c.style();
  const double row_pitch = ts.row_pitch(), pad = ts.pad;
  const double cap_h = draw_lines(c, {left, top}, p.caption, s.label_pt, -1, kText, true, width);
  const double y0 = top + cap_h + 3;
  for (size_t j = 0; j < p.boxes.size(); ++j) {
    const Placed& b = p.boxes[j];
    const double v = t.weight[j];
    const render::Rgb8 bg =
        render::colormap_rgb8(cb.cmap, render::color_position(v, cb.vmax, cb.log_scale));
    const QRectF box(left + b.x, y0 + b.row * row_pitch, b.w, ts.box_h);
    const bool future = int(j) > t.query;
    c.painter().fillRect(box, future ? QColor(Qt::white) : QColor(bg.r, bg.g, bg.b));
    if (int(j) == t.query) c.rect_outline(box.adjusted(0.4, 0.4, -0.4, -0.4), kAccent, 1.0);
    const double lum = 0.2126 * bg.r + 0.7152 * bg.g + 0.0722 * bg.b;
    c.text({box.left() + pad, box.center().y()}, b.label, ts.tok_pt, -1, 0,
           future      ? QColor(170, 170, 170)
           : lum > 120 ? kText
                       : QColor(Qt::white),
           false, 0, b.w - 2 * pad);
  }
  if (!p.more.isEmpty())
    c.text({left + p.more_x, y0 + (p.rows - 1) * row_pitch + ts.box_h / 2}, p.more, s.tick_pt, -1,
           0, kMuted);
}

}  // namespace

double paint_tokens(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  if (d.tokens.empty()) return area.top();
  // Text backgrounds need a light low end: the default viridis becomes blues here.
  const render::Colormap cmap =
      render::colormap_from_name(d.settings.colormap == "viridis" ? "blues" : d.settings.colormap);
  double vmax = d.settings.vmax;
  if (!(vmax > 0)) {
    for (const auto& t : d.tokens)
      for (float v : t.weight) vmax = std::max(vmax, double(v));
    if (!(vmax > 0)) vmax = 1;
  }
  const Colorbar cb{cmap, vmax, d.settings.log_scale, "Attention from query"};
  const int K = int(d.tokens.size());
  const double lh_label = c.line_height(s.label_pt);
  TokenStyle ts;
  ts.tok_pt = s.tick_pt + 0.5;
  ts.box_h = c.line_height(ts.tok_pt) + 2.5;
  ts.lh_label = lh_label;

  // Width beside the colour bar, whose title lines depend on its height: twice over.
  double cb_h = 100, width = 0, natural = 0;
  std::vector<Paragraph> paras;
  for (int it = 0; it < 2; ++it) {
    width = area.width() - colorbar_width(c, cb, cb_h, cb_h + 2 * (lh_label + 3)) - 14;
    paras.clear();
    natural = 0;
    for (const auto& t : d.tokens) {
      paras.push_back(flow(c, t, ts, width, 1 << 20));
      natural += ts.height(paras.back());
    }
    if (it == 0)
      cb_h =
          std::clamp((c.free_height() ? natural : std::min(area.height(), natural)) - lh_label - 12,
                     60.0, 140.0);
  }
  // The last paragraph's gap is not needed on the page.
  if (!c.free_height() && natural - ts.para_gap > area.height() + 1e-6)
    natural = shorten(c, d, ts, width, natural, area.height(), paras);
  // The bar beside the paragraphs; its title may reach past it by the caption's height above and
  // below. The whole block is centred on a page taller than it.
  const double title_room = cb_h + 2 * (lh_label + 3);
  double title_len = 0;
  for (const QString& l : wrap_text(c, cb.title, s.label_pt, std::max(cb_h, title_room)))
    title_len = std::max(title_len, c.text_width(l, s.label_pt));
  const double bar_top = lh_label + 3;
  const double block_h =
      std::max({natural - ts.para_gap, bar_top + cb_h + c.line_height(s.tick_pt) / 2 + 2,
                bar_top + cb_h / 2 + title_len / 2 + 2});
  double top = area.top() + (c.free_height() ? 0 : std::max(0.0, (area.height() - block_h) / 2));
  const double y_start = top;
  for (int k = 0; k < K; ++k) {
    draw_paragraph(c, d.tokens[size_t(k)], paras[size_t(k)], ts, area.left(), top, width, cb);
    top += ts.height(paras[size_t(k)]);
  }
  const QRectF bar(area.right() - colorbar_width(c, cb, cb_h, title_room), y_start + bar_top,
                   kColorbarBar, cb_h);
  draw_colorbar(c, bar, cb, title_room);
  return y_start + block_h;
}

}  // namespace attn::fig
