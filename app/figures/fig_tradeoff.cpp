// Preset "tradeoff": each variant as a point of cost (density or kernel time) against error
// (output error, next-token KL, ...), one line per pattern family, parameters as point labels.
#include <QPainterPath>
#include <algorithm>
#include <cmath>
#include <functional>

#include "app/figures/plot_axis.h"
#include "app/figures/presets.h"
#include "compute/error.h"
#include "compute/spec.h"

namespace attn::fig {
namespace {

double value(const TradeoffPoint& p, const std::string& name) {
  if (name == "density") return p.density;
  if (name == "seconds") return (p.select_seconds + p.kernel_seconds) * 1e3;
  if (name == "select_seconds") return p.select_seconds * 1e3;
  if (name == "kernel_seconds") return p.kernel_seconds * 1e3;
  if (name == "flops") return p.flops;
  if (name == "rel_error") return p.rel_error;
  if (name == "mass_recall") return p.mass_recall;
  if (name == "row_kl") return p.row_kl;
  if (name == "next_token_kl") return p.next_token_kl;
  if (name == "top1_agreement") return p.top1_agreement;
  if (name == "accuracy") return p.accuracy;
  if (name == "loss") return p.loss;
  return NAN;
}

QString axis_title(const std::string& name) {
  if (name == "density") return "Density (kept / visible entries)";
  if (name == "seconds") return "Attention time (ms, all layers: selection + kernel)";
  if (name == "select_seconds") return "Selection time (ms, all layers)";
  if (name == "kernel_seconds") return "Attention kernel time (ms, all layers, selection apart)";
  if (name == "flops") return "Counted FLOPs";
  if (name == "rel_error") return "Relative output error";
  if (name == "mass_recall") return "Dense mass kept (recall)";
  // Two different KLs: the attention rows' (per head, vs dense) and the model's next-token
  // distribution's (end to end). Named apart everywhere.
  if (name == "row_kl") return "Row KL vs dense (nats)";
  if (name == "next_token_kl") return "Next-token KL vs dense (nats)";
  if (name == "top1_agreement") return "Top-1 agreement";
  if (name == "accuracy") return "Class accuracy (95% interval)";
  if (name == "loss") return "Next-token loss (nats, 95% interval)";
  return qs(name);
}

// Whether a y axis starts at zero: errors and KLs do; recall, accuracy and loss are read near
// their values (a loss of 3.6 against 3.7 is the difference that matters).
bool from_zero(const std::string& name) {
  return name != "mass_recall" && name != "accuracy" && name != "loss";
}

// The bootstrap interval of a point's y value, where it has one: {lo, hi}, else NaNs.
std::pair<double, double> interval(const TradeoffPoint& p, const std::string& name) {
  if (name == "accuracy") return {p.accuracy_lo, p.accuracy_hi};
  if (name == "loss") return {p.loss_lo, p.loss_hi};
  return {NAN, NAN};
}

// Parameters of a spec in order, as compute's parser reads them:
// "block_topk(block=4,k=2)+softcap(cap=30)" -> {block: 4, k: 2, cap: 30}. A spec that does not
// parse (hand-edited CSV) has no parameters, so its point is drawn without a label.
std::vector<std::pair<std::string, std::string>> spec_params(const std::string& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  try {
    for (const SpecPiece& piece : parse_spec(spec))
      out.insert(out.end(), piece.params.begin(), piece.params.end());
  } catch (const Error&) {
  }
  return out;
}

// Names of the parameters that vary within a series (what its point labels show).
std::vector<size_t> varying(const std::vector<const TradeoffPoint*>& series) {
  std::vector<size_t> out;
  if (series.empty()) return out;
  const auto first = spec_params(series.front()->spec);
  for (size_t i = 0; i < first.size(); ++i)
    for (const auto* p : series) {
      const auto ps = spec_params(p->spec);
      if (ps.size() != first.size() || ps[i].second != first[i].second) {
        out.push_back(i);
        break;
      }
    }
  return out;
}

QString point_label(const TradeoffPoint& p, const std::vector<size_t>& which) {
  const auto ps = spec_params(p.spec);
  QString out;
  for (size_t i : which)
    if (i < ps.size()) out += (out.isEmpty() ? "" : ",") + qs(ps[i].second);
  return out;
}

// The y axes drawn: the chosen one, then next-token KL or mass recall when the points have it.
std::vector<std::string> y_axes(const FigureData& d) {
  const auto& pts = d.tradeoff;
  std::vector<std::string> ynames = {d.settings.tradeoff_y.empty() ? "rel_error"
                                                                   : d.settings.tradeoff_y};
  for (const char* extra : {"next_token_kl", "mass_recall"}) {
    bool any = false;
    for (const auto& p : pts) any = any || std::isfinite(value(p, extra));
    if (any && extra != ynames[0]) {
      ynames.push_back(extra);
      break;
    }
  }
  return ynames;
}

// The series a point belongs to: its pattern id, and the storage precision when not f32 (a
// sweep over precisions draws each one as its own line, named in the legend).
std::string series_key(const TradeoffPoint& p) {
  return p.precision == "f32" || p.precision.empty() ? p.pattern
                                                     : p.pattern + " \u00b7 " + p.precision;
}

// Series by pattern id (and precision), in order of first appearance; labels show what varies
// in each.
struct Series {
  std::vector<std::string> groups;        // series keys
  std::vector<std::vector<size_t>> vary;  // [group] parameters its point labels show
  std::vector<LegendItem> legend;
};

Series series_of(const std::vector<TradeoffPoint>& pts) {
  Series out;
  std::vector<std::string>& groups = out.groups;
  for (const auto& p : pts)
    if (std::find(groups.begin(), groups.end(), series_key(p)) == groups.end())
      groups.push_back(series_key(p));
  out.vary.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<const TradeoffPoint*> members;
    for (const auto& p : pts)
      if (series_key(p) == groups[g]) members.push_back(&p);
    std::vector<size_t>& vary = out.vary[g];
    vary = varying(members);
    QString text = qs(members.front()->pattern);
    const auto ps = spec_params(members.front()->spec);
    QString fixed_params, names;
    for (size_t i = 0; i < ps.size(); ++i) {
      const bool v = std::find(vary.begin(), vary.end(), i) != vary.end();
      QString& dst = v ? names : fixed_params;
      dst += (dst.isEmpty() ? "" : ", ") + qs(v ? ps[i].first : ps[i].first + "=" + ps[i].second);
    }
    // "block_topk (k; block=4)": what the point labels show, then what is fixed.
    const QString inner =
        names + (names.isEmpty() || fixed_params.isEmpty() ? "" : "; ") + fixed_params;
    if (!inner.isEmpty()) text += " (" + inner + ")";
    if (groups[g] == "dense") text = "dense (the reference)";
    if (groups[g] != members.front()->pattern) text += qs(" \u00b7 " + members.front()->precision);
    out.legend.push_back({LegendItem::Marker, series_color(int(g)), int(g), text});
  }
  return out;
}

// The panels' shared x axis, each panel's y axis, titles and sizes.
struct TradeoffLayout {
  Axis ax;
  std::vector<Axis> ay;                      // [panel]
  std::vector<std::vector<QString>> ytitle;  // [panel] lines
  std::vector<double> left, ytick_w;         // [panel] room left of the panel, tick label width
  std::vector<QString> xtitle;
  double pw = 0, ph = 0, top = 0, bottom = 0;
};

// The layout, twice over: tick counts and title lines depend on the panels' size and back.
TradeoffLayout layout_panels(FigurePainter& c, const QRectF& area, const FigureData& d,
                             const std::string& xname, const std::vector<std::string>& ynames,
                             double legend_h) {
  const FigureStyle& s = c.style();
  const auto& pts = d.tradeoff;
  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  const int P = int(ynames.size());
  const double gap = 16;
  std::vector<double> xs;
  for (const auto& p : pts) xs.push_back(value(p, xname));
  std::vector<std::vector<double>> ys(static_cast<size_t>(P));
  for (int k = 0; k < P; ++k)
    for (const auto& p : pts) {
      ys[size_t(k)].push_back(value(p, ynames[size_t(k)]));
      const auto [lo, hi] = interval(p, ynames[size_t(k)]);  // error bars inside the axis
      if (std::isfinite(lo) && std::isfinite(hi))
        ys[size_t(k)].insert(ys[size_t(k)].end(), {lo, hi});
    }
  TradeoffLayout l;
  double& pw = l.pw;
  double& ph = l.ph;
  pw = (area.width() - P * 60 - (P - 1) * gap) / P;
  ph = c.free_height() ? pw * 0.8 : area.height() - legend_h - 40;
  l.ay.resize(size_t(P));
  l.ytitle.resize(size_t(P));
  l.left.resize(size_t(P));
  l.ytick_w.resize(size_t(P));
  l.top = lh_tick / 2 + 1;
  auto label_w = [&](const Axis& a) {
    double w = 0;
    for (double t : a.ticks) w = std::max(w, c.text_width(tick_label(t), s.tick_pt));
    return w;
  };
  for (int it = 0; it < 3; ++it) {
    l.ax = make_axis(xs, xname != "density", true, [&](const Axis& a) {
      // Neighbouring labels keep 6 points apart.
      const double w = label_w(a);
      for (size_t i = 1; i < a.ticks.size(); ++i)
        if ((a.frac(a.ticks[i]) - a.frac(a.ticks[i - 1])) * pw < w + 6) return false;
      return true;
    });
    double lefts = 0;
    for (int k = 0; k < P; ++k) {
      const size_t u = size_t(k);
      l.ay[u] = make_axis(ys[u], true, from_zero(ynames[u]), [&](const Axis& a) {
        for (size_t i = 1; i < a.ticks.size(); ++i)
          if ((a.frac(a.ticks[i]) - a.frac(a.ticks[i - 1])) * ph < lh_tick * 1.3) return false;
        return true;
      });
      l.ytick_w[u] = label_w(l.ay[u]);
      l.ytitle[u] = wrap_text(c, axis_title(ynames[u]) + l.ay[u].suffix(), s.label_pt, ph);
      l.left[u] = l.ytitle[u].size() * lh_label + 4 + l.ytick_w[u] + 4;
      lefts += l.left[u];
    }
    pw = std::max(10.0, (area.width() - lefts - (P - 1) * gap - 4) / P);
    // One x title under all panels: they share the x axis.
    const double span = P * pw + lefts - l.left[0] + (P - 1) * gap;
    l.xtitle = wrap_text(c, axis_title(xname) + l.ax.suffix(), s.label_pt, span);
    l.bottom = lh_tick / 2 + 0.5 + lh_tick + 4 + l.xtitle.size() * lh_label;
    // On a page the panels take the height left; at a free height, in proportion to their width.
    ph = c.free_height() ? std::clamp(pw * 0.8, 80.0, 360.0)
                         : std::max(10.0, area.height() - legend_h - l.top - l.bottom);
  }
  return l;
}

// A panel's grid lines and ticks.
void draw_panel_ticks(FigurePainter& c, const QRectF& r, const Axis& ax, const Axis& a,
                      double ytick_w) {
  const FigureStyle& s = c.style();
  const double lh_tick = c.line_height(s.tick_pt);
  for (double t : a.ticks) {
    const double y = r.bottom() - a.frac(t) * r.height();
    c.line({r.left(), y}, {r.right(), y}, kGrid, s.line_pt * 0.8);
    c.line({r.left() - 2, y}, {r.left(), y});
    c.text({r.left() - 3, y}, tick_label(t), s.tick_pt, 1, 0, kText, false, 0, ytick_w);
  }
  for (double t : ax.ticks) {
    const double xx = r.left() + ax.frac(t) * r.width();
    c.line({xx, r.top()}, {xx, r.bottom()}, kGrid, s.line_pt * 0.8);
    c.line({xx, r.bottom()}, {xx, r.bottom() + 2.5});
    c.text({xx, r.bottom() + lh_tick / 2 + 0.5}, tick_label(t), s.tick_pt, 0, -1);
  }
}

// One series in a panel: its line, error bars, markers, and the point labels that find room
// (`taken`: boxes drawn so far, a label that would overlap one is skipped).
void draw_series(FigurePainter& c, const QRectF& r, const Axis& ax, const Axis& a,
                 const std::vector<TradeoffPoint>& pts, const Series& ser, size_t g,
                 const std::string& xname, const std::string& yname, std::vector<QRectF>& taken) {
  const FigureStyle& s = c.style();
  QPainter& p = c.painter();
  auto map = [&](double vx, double vy) {
    return QPointF(r.left() + ax.frac(vx) * r.width(), r.bottom() - a.frac(vy) * r.height());
  };
  std::vector<std::pair<double, const TradeoffPoint*>> series;
  for (const auto& pt : pts) {
    const double vx = value(pt, xname), vy = value(pt, yname);
    if (series_key(pt) != ser.groups[g] || !ax.shows(vx) || !a.shows(vy)) continue;
    series.push_back({vx, &pt});
  }
  std::sort(series.begin(), series.end(),
            [](const auto& u, const auto& v) { return u.first < v.first; });
  const QColor col = series_color(int(g));
  if (series.size() > 1) {
    QPainterPath path;
    for (size_t i = 0; i < series.size(); ++i) {
      const QPointF q = map(series[i].first, value(*series[i].second, yname));
      if (i == 0)
        path.moveTo(q);
      else
        path.lineTo(q);
    }
    p.setPen(QPen(col, 1.0));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
  }
  for (const auto& [vx, pt] : series) {
    const auto [lo, hi] = interval(*pt, yname);
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    // Error bar: the interval with short caps.
    const QPointF a = map(vx, lo), b = map(vx, hi);
    c.line(a, b, col, s.line_pt);
    c.line(a - QPointF(2, 0), a + QPointF(2, 0), col, s.line_pt);
    c.line(b - QPointF(2, 0), b + QPointF(2, 0), col, s.line_pt);
  }
  for (const auto& [vx, pt] : series) {
    const QPointF q = map(vx, value(*pt, yname));
    draw_marker(p, q, int(g), col, 2.6);
    c.mark(QRectF(q, QSizeF(0, 0)), r);
    taken.push_back(QRectF(q.x() - 2.6, q.y() - 2.6, 5.2, 5.2));
  }
  for (const auto& [vx, pt] : series) {
    const QPointF q = map(vx, value(*pt, yname));
    const QString lab = point_label(*pt, ser.vary[g]);
    if (lab.isEmpty()) continue;
    const double lw = c.text_width(lab, s.tick_pt - 1), lh = c.line_height(s.tick_pt - 1);
    // First free spot among: upper right, lower right, upper left, lower left.
    for (const QPointF off : {QPointF(3.5, -2.5 - lh), QPointF(3.5, 2.5),
                              QPointF(-3.5 - lw, -2.5 - lh), QPointF(-3.5 - lw, 2.5)}) {
      const QRectF box(q + off, QSizeF(lw, lh));
      bool free = r.adjusted(1, 1, -1, -1).contains(box);
      for (const QRectF& t : taken) free = free && !t.intersects(box);
      if (!free) continue;
      c.text(box.topLeft(), lab, s.tick_pt - 1, -1, -1, col.darker(130));
      taken.push_back(box);
      break;
    }
  }
}

}  // namespace

double paint_tradeoff(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const auto& pts = d.tradeoff;
  if (pts.empty()) return area.top();
  const std::string xname = d.settings.tradeoff_x.empty() ? "density" : d.settings.tradeoff_x;
  const std::vector<std::string> ynames = y_axes(d);
  const Series ser = series_of(pts);
  const double lh_tick = c.line_height(s.tick_pt);
  const double legend_h = draw_legend(c, area.topLeft(), area.width(), ser.legend, false) + 6;
  const TradeoffLayout l = layout_panels(c, area, d, xname, ynames, legend_h);
  const int P = int(ynames.size());
  const double gap = 16;

  draw_legend(c, area.topLeft(), area.width(), ser.legend);
  double x = area.left();
  QRectF first, last;
  for (int k = 0; k < P; ++k) {
    const Axis& a = l.ay[size_t(k)];
    x += l.left[size_t(k)];
    const QRectF r(x, area.top() + legend_h + l.top, l.pw, l.ph);
    x += l.pw + gap;
    if (k == 0) first = r;
    last = r;
    draw_panel_ticks(c, r, l.ax, a, l.ytick_w[size_t(k)]);
    c.rect_outline(r);
    draw_vertical_lines(c, {r.left() - l.left[size_t(k)], r.center().y()}, l.ytitle[size_t(k)],
                        s.label_pt, kText, l.ph);
    QPainter& p = c.painter();
    p.save();
    p.setClipRect(r.adjusted(-4, -4, 4, 4));
    std::vector<QRectF> taken;  // label boxes drawn so far: a label that would overlap is skipped
    for (size_t g = 0; g < ser.groups.size(); ++g)
      draw_series(c, r, l.ax, a, pts, ser, g, xname, ynames[size_t(k)], taken);
    p.restore();
  }
  draw_lines(c, {(first.left() + last.right()) / 2, first.bottom() + lh_tick * 1.5 + 4.5}, l.xtitle,
             s.label_pt, 0, kText, false, last.right() - first.left());
  return c.free_height() ? first.bottom() + l.bottom : area.bottom();
}

}  // namespace attn::fig
