// Preset "stream": perplexity against tokens streamed, one line per KV-cache policy (the
// StreamingLLM figure), with the model's context marked; beside it each policy's perplexity over
// the whole stream against the memory its cache held (quality against cache memory).
#include <QPainterPath>
#include <algorithm>
#include <cmath>

#include "app/figures/plot_axis.h"
#include "app/figures/presets.h"

namespace attn::fig {

namespace {

// Colours cycle after 8 series; the marker shape then differs from the first round's, and the
// line is dashed.
int shape(size_t i) {
  return int(i + i / 8) % 4;
}

// Widest tick label of an axis.
double tick_width(FigurePainter& c, const Axis& a) {
  double w = 0;
  for (double t : a.ticks) w = std::max(w, c.text_width(tick_label(t), c.style().tick_pt));
  return w;
}

// "1,234": token counts as the README and the CLI print them.
QString grouped(int n) {
  QString d = QString::number(n), out;
  for (int i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

// Whether the policies read streams of different lengths (one stopped at the context).
bool lengths_differ(const StreamFigure& sf) {
  for (const StreamCurve& cv : sf.curves)
    if (cv.read != sf.curves.front().read) return true;
  return false;
}

// Each policy, with the tokens its curve and its whole-stream perplexity cover when the policies
// differ there: a policy stopped at the context is not compared over the same tokens.
std::vector<LegendItem> stream_legend(const StreamFigure& sf) {
  std::vector<LegendItem> legend;
  const bool differ = lengths_differ(sf);
  for (size_t i = 0; i < sf.curves.size(); ++i) {
    const StreamCurve& cv = sf.curves[i];
    QString text = qs(cv.spec);
    if (differ || !cv.stopped.empty())
      text += " (" + grouped(cv.read) + " tokens" +
              (cv.stopped.empty() ? QString(")") : QString(", stopped at the context)"));
    legend.push_back({LegendItem::Marker, series_color(int(i)), shape(i), text});
  }
  return legend;
}

// The two panels' axes, titles and sizes: the curves (1) beside quality against memory (2).
struct StreamLayout {
  double pw1 = 0, pw2 = 0, ph = 0, left1 = 0, left2 = 0, bottom = 0;
  Axis ax1, ay1, ax2, ay2;
  std::vector<QString> yt1, yt2, xt1, xt2;
};

// Panel widths: the curves take 62% of what the labels leave; a few rounds settle the tick
// counts, title lines and sizes, which depend on each other.
StreamLayout layout_stream(FigurePainter& c, const QRectF& area, const StreamFigure& sf,
                           double legend_h, double gap, double top) {
  const FigureStyle& s = c.style();
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  std::vector<double> xs, ys, mem, qual;
  for (const StreamCurve& cv : sf.curves) {
    xs.insert(xs.end(), cv.tokens.begin(), cv.tokens.end());
    ys.insert(ys.end(), cv.ppl.begin(), cv.ppl.end());
    if (std::isfinite(cv.perplexity)) {
      mem.push_back(cv.mean_bytes / 1024.0);
      qual.push_back(cv.perplexity);
    }
  }
  if (sf.context > 0) xs.push_back(sf.context);
  const QString ytitle_text = "Perplexity (last " + QString::number(sf.smooth) + " tokens)";
  const QString x1_text = "Tokens streamed", x2_text = "Mean KV cache (KiB)";
  const QString y2_text =
      lengths_differ(sf) ? "Perplexity (all the tokens it read)" : "Perplexity (whole stream)";
  StreamLayout l;
  auto fits_x = [&](double pw) {
    return [&, pw](const Axis& a) {
      const double w = tick_width(c, a);
      for (size_t i = 1; i < a.ticks.size(); ++i)
        if ((a.frac(a.ticks[i]) - a.frac(a.ticks[i - 1])) * pw < w + 6) return false;
      return true;
    };
  };
  auto fits_y = [&](const Axis& a) {
    for (size_t i = 1; i < a.ticks.size(); ++i)
      if ((a.frac(a.ticks[i]) - a.frac(a.ticks[i - 1])) * l.ph < lh_tick * 1.3) return false;
    return true;
  };
  l.pw1 = (area.width() - 120 - gap) * 0.62;
  l.pw2 = (area.width() - 120 - gap) * 0.38;
  l.ph = c.free_height() ? l.pw1 * 0.55 : area.height() - legend_h - 40;
  for (int it = 0; it < 3; ++it) {
    l.ax1 = make_axis(xs, false, true, fits_x(l.pw1));
    l.ay1 = make_axis(ys, true, false, fits_y, 8);  // a policy that fails dwarfs the rest
    l.ax2 = make_axis(mem, false, true, fits_x(l.pw2));
    l.ay2 = make_axis(qual, true, false, fits_y);
    l.yt1 = wrap_text(c, ytitle_text + l.ay1.suffix(), s.label_pt, l.ph);
    l.yt2 = wrap_text(c, y2_text + l.ay2.suffix(), s.label_pt, l.ph);
    l.left1 = l.yt1.size() * lh_label + 4 + tick_width(c, l.ay1) + 4;
    l.left2 = l.yt2.size() * lh_label + 4 + tick_width(c, l.ay2) + 4;
    const double free = std::max(20.0, area.width() - l.left1 - l.left2 - gap - 4);
    l.pw1 = free * 0.62;
    l.pw2 = free * 0.38;
    l.xt1 = wrap_text(c, x1_text, s.label_pt, l.pw1);
    l.xt2 = wrap_text(c, x2_text, s.label_pt, l.pw2);
    l.bottom = lh_tick / 2 + 0.5 + lh_tick + 4 + std::max(l.xt1.size(), l.xt2.size()) * lh_label;
    l.ph = c.free_height() ? std::clamp(l.pw1 * 0.55, 80.0, 320.0)
                           : std::max(10.0, area.height() - legend_h - top - l.bottom);
  }
  return l;
}

// Axes, grid lines and titles of one panel.
void draw_frame(FigurePainter& c, const QRectF& r, const Axis& ax, const Axis& ay,
                const std::vector<QString>& yt, const std::vector<QString>& xt, double left) {
  const FigureStyle& s = c.style();
  const double lh_tick = c.line_height(s.tick_pt);
  for (double t : ay.ticks) {
    const double y = r.bottom() - ay.frac(t) * r.height();
    c.line({r.left(), y}, {r.right(), y}, kGrid, s.line_pt * 0.8);
    c.line({r.left() - 2, y}, {r.left(), y});
    c.text({r.left() - 3, y}, tick_label(t), s.tick_pt, 1, 0, kText, false, 0, tick_width(c, ay));
  }
  for (double t : ax.ticks) {
    const double x = r.left() + ax.frac(t) * r.width();
    c.line({x, r.top()}, {x, r.bottom()}, kGrid, s.line_pt * 0.8);
    c.line({x, r.bottom()}, {x, r.bottom() + 2.5});
    c.text({x, r.bottom() + lh_tick / 2 + 0.5}, tick_label(t), s.tick_pt, 0, -1);
  }
  c.rect_outline(r);
  draw_vertical_lines(c, {r.left() - left, r.center().y()}, yt, s.label_pt, kText, r.height());
  draw_lines(c, {r.center().x(), r.bottom() + lh_tick * 1.5 + 4.5}, xt, s.label_pt, 0, kText, false,
             r.width());
}

// Perplexity against tokens streamed: one line per policy, its marker at its end, the model's
// context dashed.
void draw_stream_curves(FigurePainter& c, const QRectF& r1, const Axis& ax1, const Axis& ay1,
                        const StreamFigure& sf) {
  const FigureStyle& s = c.style();
  QPainter& p = c.painter();
  p.save();
  p.setClipRect(r1.adjusted(-1, -1, 1, 1));
  if (sf.context > 0 && ax1.shows(sf.context)) {
    const double x = r1.left() + ax1.frac(sf.context) * r1.width();
    p.setPen(QPen(QColor(120, 120, 120), s.line_pt, Qt::DashLine));
    p.drawLine(QPointF(x, r1.top()), QPointF(x, r1.bottom()));
  }
  for (size_t i = 0; i < sf.curves.size(); ++i) {
    const StreamCurve& cv = sf.curves[i];
    QPainterPath path;
    bool open = false;
    for (size_t k = 0; k < cv.tokens.size(); ++k) {
      if (!ay1.shows(cv.ppl[k])) {
        open = false;
        continue;
      }
      const QPointF q(r1.left() + ax1.frac(cv.tokens[k]) * r1.width(),
                      r1.bottom() - ay1.frac(cv.ppl[k]) * r1.height());
      if (open)
        path.lineTo(q);
      else
        path.moveTo(q);
      open = true;
    }
    p.setPen(QPen(series_color(int(i)), 1.0, (i / 8) % 2 ? Qt::DashLine : Qt::SolidLine));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
    if (!cv.tokens.empty() && ay1.shows(cv.ppl.back())) {  // the curve's end carries its marker
      const QPointF q(r1.left() + ax1.frac(cv.tokens.back()) * r1.width(),
                      r1.bottom() - ay1.frac(cv.ppl.back()) * r1.height());
      draw_marker(p, q, shape(i), series_color(int(i)), 2.4);
      c.mark(QRectF(q, QSizeF(0, 0)), r1);
    }
  }
  p.restore();
  if (sf.context > 0 && ax1.shows(sf.context)) {
    const double x = r1.left() + ax1.frac(sf.context) * r1.width();
    const QString lab = "context";
    if (x + 2 + c.text_width(lab, s.tick_pt - 1) < r1.right())
      c.text({x + 2, r1.top() + 2}, lab, s.tick_pt - 1, -1, -1, QColor(100, 100, 100));
  }
}

// Each policy's perplexity over the whole stream against its mean cache memory.
void draw_memory_points(FigurePainter& c, const QRectF& r2, const Axis& ax2, const Axis& ay2,
                        const StreamFigure& sf) {
  QPainter& p = c.painter();
  p.save();
  p.setClipRect(r2.adjusted(-4, -4, 4, 4));
  for (size_t i = 0; i < sf.curves.size(); ++i) {
    const StreamCurve& cv = sf.curves[i];
    if (!std::isfinite(cv.perplexity) || !ay2.shows(cv.perplexity)) continue;
    const QPointF q(r2.left() + ax2.frac(cv.mean_bytes / 1024.0) * r2.width(),
                    r2.bottom() - ay2.frac(cv.perplexity) * r2.height());
    draw_marker(p, q, shape(i), series_color(int(i)), 2.8);
    c.mark(QRectF(q, QSizeF(0, 0)), r2);
  }
  p.restore();
  // A point over fewer tokens than the others says over how many.
  if (!lengths_differ(sf)) return;
  int longest = 0;
  for (const StreamCurve& cv : sf.curves) longest = std::max(longest, cv.read);
  const double pt = c.style().tick_pt - 1;
  for (size_t i = 0; i < sf.curves.size(); ++i) {
    const StreamCurve& cv = sf.curves[i];
    if (cv.read >= longest || !std::isfinite(cv.perplexity) || !ay2.shows(cv.perplexity)) continue;
    const QPointF q(r2.left() + ax2.frac(cv.mean_bytes / 1024.0) * r2.width(),
                    r2.bottom() - ay2.frac(cv.perplexity) * r2.height());
    const QString lab = "over " + grouped(cv.read) + " tokens";
    const double w = c.text_width(lab, pt);
    const bool right = q.x() + 4 + w <= r2.right(), left = q.x() - 4 - w >= r2.left();
    if (!right && !left) continue;  // no room in the panel: the legend says it
    c.text({right ? q.x() + 4 : q.x() - 4, q.y()}, lab, pt, right ? -1 : 1, 0,
           series_color(int(i)));
  }
}

}  // namespace

double paint_stream(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const StreamFigure& sf = d.stream;
  if (sf.curves.empty()) return area.top();
  const std::vector<LegendItem> legend = stream_legend(sf);
  const double lh_tick = c.line_height(s.tick_pt);
  const double legend_h = draw_legend(c, area.topLeft(), area.width(), legend, false) + 6;
  const double gap = 18, top = lh_tick / 2 + 1;
  const StreamLayout l = layout_stream(c, area, sf, legend_h, gap, top);
  draw_legend(c, area.topLeft(), area.width(), legend);
  const double y0 = area.top() + legend_h + top;
  const QRectF r1(area.left() + l.left1, y0, l.pw1, l.ph);
  const QRectF r2(r1.right() + gap + l.left2, y0, l.pw2, l.ph);
  draw_frame(c, r1, l.ax1, l.ay1, l.yt1, l.xt1, l.left1);
  draw_frame(c, r2, l.ax2, l.ay2, l.yt2, l.xt2, l.left2);
  draw_stream_curves(c, r1, l.ax1, l.ay1, sf);
  draw_memory_points(c, r2, l.ax2, l.ay2, sf);
  return c.free_height() ? r1.bottom() + l.bottom : area.bottom();
}

}  // namespace attn::fig
