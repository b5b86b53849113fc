// Preset "sinks": bars of the attention mass each token receives (mean over heads and queries),
// one row per layer (at most six, evenly spread, always the first and last), sinks highlighted.
#include <algorithm>
#include <cmath>

#include "app/figures/presets.h"

namespace attn::fig {

double paint_sinks(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const SinkData& k = d.sinks;
  if (k.n_layers == 0 || k.n == 0) return area.top();
  std::vector<int> layers;
  const int shown = std::min(k.n_layers, 6);
  for (int i = 0; i < shown; ++i) {
    const int l = shown == 1 ? 0 : int(std::lround(double(i) * (k.n_layers - 1) / (shown - 1)));
    if (layers.empty() || layers.back() != l) layers.push_back(l);
  }
  const int R = int(layers.size());
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  double ymax = 0;
  for (int l : layers)
    for (int j = 0; j < k.n; ++j) ymax = std::max(ymax, double(k.received[size_t(l) * k.n + j]));
  ymax = std::max(ymax, k.threshold * 1.1);
  const std::vector<double> yt = nice_ticks(0, ymax, 3);
  ymax = std::max(ymax, yt.back());

  const double ytick_w = c.text_width("0.00", s.tick_pt);
  const double left = lh_label + 4 + ytick_w + 4;  // axis title, tick labels
  const double width = area.width() - left - 4;
  std::vector<int> js = thinned(k.n, width, lh_tick * 1.05);
  for (int j : k.sinks)  // sinks are always named
    if (std::find(js.begin(), js.end(), j) == js.end()) js.push_back(j);
  double xlab_h = 0;
  for (int j : js)
    xlab_h =
        std::min(48.0, std::max(xlab_h, c.text_width(token_label(k.labels[size_t(j)]), s.tick_pt)));
  const double legend_h = lh_tick + 6;
  const double bottom = 3 + xlab_h + 3 + lh_label + 2;
  const double row_gap = 5;
  const double row_h = (area.height() - legend_h - bottom - (R - 1) * row_gap) / R;
  const double bw = width / k.n;
  const double x0 = area.left() + left;

  // Legend.
  double lx = x0;
  const double ly = area.top() + lh_tick / 2;
  auto key = [&](QColor col, const QString& t) {
    c.painter().fillRect(QRectF(lx, ly - 3, 6, 6), col);
    c.text({lx + 8, ly}, t, s.tick_pt, -1, 0);
    lx += 8 + c.text_width(t, s.tick_pt) + 12;
  };
  key(series_color(0), "mean attention a token receives (over heads and queries)");
  key(kAccent, QString("sink (> %1 in a layer)").arg(k.threshold));
  c.painter().save();
  QPen dash(kMuted, s.line_pt, Qt::DashLine);
  c.painter().setPen(dash);
  c.painter().drawLine(QPointF(lx, ly), QPointF(lx + 10, ly));
  c.painter().restore();
  c.text({lx + 13, ly}, "threshold", s.tick_pt, -1, 0);

  for (int i = 0; i < R; ++i) {
    const int l = layers[size_t(i)];
    const QRectF r(x0, area.top() + legend_h + i * (row_h + row_gap), width, row_h);
    for (double t : yt) {
      const double y = r.bottom() - t / ymax * r.height();
      c.line({r.left(), y}, {r.right(), y}, kGrid, s.line_pt * 0.8);
      c.line({r.left() - 2, y}, {r.left(), y});
      c.text({r.left() - 3, y}, tick_label(t), s.tick_pt, 1, 0);
    }
    c.painter().save();
    c.painter().setPen(Qt::NoPen);
    for (int j = 0; j < k.n; ++j) {
      const double v = k.received[size_t(l) * k.n + j];
      const bool sink = v > k.threshold;
      const double hgt = v / ymax * r.height();
      c.painter().fillRect(QRectF(r.left() + j * bw + bw * 0.12, r.bottom() - hgt, bw * 0.76, hgt),
                           sink ? kAccent : series_color(0));
    }
    c.painter().restore();
    const double ty = r.bottom() - k.threshold / ymax * r.height();
    c.painter().save();
    c.painter().setPen(QPen(kMuted, s.line_pt, Qt::DashLine));
    c.painter().drawLine(QPointF(r.left(), ty), QPointF(r.right(), ty));
    c.painter().restore();
    c.line(r.bottomLeft(), r.bottomRight());
    c.line(r.bottomLeft(), r.topLeft());
    const QString name = QString("layer %1").arg(l);
    const double nw = c.text_width(name, s.tick_pt, true) + 4;
    c.painter().fillRect(QRectF(r.right() - nw, r.top(), nw, lh_tick + 1), Qt::white);
    c.text({r.right() - 2, r.top() + 0.5}, name, s.tick_pt, 1, -1, kText, true);
  }
  const double yb = area.top() + legend_h + R * row_h + (R - 1) * row_gap;
  for (int j : js) {
    const double x = x0 + (j + 0.5) * bw;
    const bool sink = std::find(k.sinks.begin(), k.sinks.end(), j) != k.sinks.end();
    c.line({x, yb}, {x, yb + 2});
    c.text({x, yb + 3}, token_label(k.labels[size_t(j)]), s.tick_pt, 1, 0, sink ? kAccent : kText,
           sink, -90);
  }
  c.text({x0 + width / 2, yb + 3 + xlab_h + 3}, "Token", s.label_pt, 0, -1);
  c.text({area.left() + lh_label / 2, area.top() + legend_h + (yb - area.top() - legend_h) / 2},
         "Mass received", s.label_pt, 0, 0, kText, false, -90);
  return area.bottom();
}

}  // namespace attn::fig
