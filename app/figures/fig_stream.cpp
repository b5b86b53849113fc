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

QString memory_label(double bytes) {
  return tick_label(bytes / 1024.0);
}

// Colours cycle after 8 series; the marker shape then differs from the first round's, and the
// line is dashed.
int shape(size_t i) {
  return int(i + i / 8) % 4;
}

}  // namespace

double paint_stream(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const StreamFigure& sf = d.stream;
  if (sf.curves.empty()) return area.top();
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < sf.curves.size(); ++i) {
    const StreamCurve& cv = sf.curves[i];
    QString text = qs(cv.spec);
    if (!cv.stopped.empty()) text += " (stopped at the context)";
    legend.push_back({LegendItem::Marker, series_color(int(i)), shape(i), text});
  }
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  const double legend_h = draw_legend(c, area.topLeft(), area.width(), legend, false) + 6;
  const double gap = 18, top = lh_tick / 2 + 1;

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
  const QString y2_text = "Perplexity (whole stream)";
  // Panel widths: the curves take 62% of what the labels leave.
  double pw1 = 0, pw2 = 0, ph = 0, left1 = 0, left2 = 0, bottom = 0;
  Axis ax1, ay1, ax2, ay2;
  std::vector<QString> yt1, yt2, xt1, xt2;
  auto label_w = [&](const Axis& a, bool memory = false) {
    double w = 0;
    for (double t : a.ticks)
      w = std::max(w, c.text_width(memory ? memory_label(t * 1024) : tick_label(t), s.tick_pt));
    return w;
  };
  auto fits_x = [&](double pw) {
    return [&, pw](const Axis& a) {
      const double w = label_w(a);
      for (size_t i = 1; i < a.ticks.size(); ++i)
        if ((a.frac(a.ticks[i]) - a.frac(a.ticks[i - 1])) * pw < w + 6) return false;
      return true;
    };
  };
  auto fits_y = [&](const Axis& a) {
    for (size_t i = 1; i < a.ticks.size(); ++i)
      if ((a.frac(a.ticks[i]) - a.frac(a.ticks[i - 1])) * ph < lh_tick * 1.3) return false;
    return true;
  };
  pw1 = (area.width() - 120 - gap) * 0.62;
  pw2 = (area.width() - 120 - gap) * 0.38;
  ph = c.free_height() ? pw1 * 0.55 : area.height() - legend_h - 40;
  for (int it = 0; it < 3; ++it) {
    ax1 = make_axis(xs, false, true, fits_x(pw1));
    ay1 = make_axis(ys, true, false, fits_y, 8);  // a policy that fails dwarfs the rest
    ax2 = make_axis(mem, false, true, fits_x(pw2));
    ay2 = make_axis(qual, true, false, fits_y);
    yt1 = wrap_text(c, ytitle_text + ay1.suffix(), s.label_pt, ph);
    yt2 = wrap_text(c, y2_text + ay2.suffix(), s.label_pt, ph);
    left1 = yt1.size() * lh_label + 4 + label_w(ay1) + 4;
    left2 = yt2.size() * lh_label + 4 + label_w(ay2) + 4;
    const double free = std::max(20.0, area.width() - left1 - left2 - gap - 4);
    pw1 = free * 0.62;
    pw2 = free * 0.38;
    xt1 = wrap_text(c, x1_text, s.label_pt, pw1);
    xt2 = wrap_text(c, x2_text, s.label_pt, pw2);
    bottom = lh_tick / 2 + 0.5 + lh_tick + 4 + std::max(xt1.size(), xt2.size()) * lh_label;
    ph = c.free_height() ? std::clamp(pw1 * 0.55, 80.0, 320.0)
                         : std::max(10.0, area.height() - legend_h - top - bottom);
  }
  draw_legend(c, area.topLeft(), area.width(), legend);
  const double y0 = area.top() + legend_h + top;
  const QRectF r1(area.left() + left1, y0, pw1, ph);
  const QRectF r2(r1.right() + gap + left2, y0, pw2, ph);

  // Axes, grid lines and titles of one panel.
  const auto frame = [&](const QRectF& r, const Axis& ax, const Axis& ay,
                         const std::vector<QString>& yt, const std::vector<QString>& xt,
                         double left) {
    for (double t : ay.ticks) {
      const double y = r.bottom() - ay.frac(t) * r.height();
      c.line({r.left(), y}, {r.right(), y}, kGrid, s.line_pt * 0.8);
      c.line({r.left() - 2, y}, {r.left(), y});
      c.text({r.left() - 3, y}, tick_label(t), s.tick_pt, 1, 0, kText, false, 0, label_w(ay));
    }
    for (double t : ax.ticks) {
      const double x = r.left() + ax.frac(t) * r.width();
      c.line({x, r.top()}, {x, r.bottom()}, kGrid, s.line_pt * 0.8);
      c.line({x, r.bottom()}, {x, r.bottom() + 2.5});
      c.text({x, r.bottom() + lh_tick / 2 + 0.5}, tick_label(t), s.tick_pt, 0, -1);
    }
    c.rect_outline(r);
    draw_vertical_lines(c, {r.left() - left, r.center().y()}, yt, s.label_pt, kText, r.height());
    draw_lines(c, {r.center().x(), r.bottom() + lh_tick * 1.5 + 4.5}, xt, s.label_pt, 0, kText,
               false, r.width());
  };
  frame(r1, ax1, ay1, yt1, xt1, left1);
  frame(r2, ax2, ay2, yt2, xt2, left2);

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
  return c.free_height() ? r1.bottom() + bottom : area.bottom();
}

}  // namespace attn::fig
