// Preset "tradeoff": each variant as a point of cost (density or kernel time) against error
// (output error, next-token KL, ...), one line per pattern family, parameters as point labels.
#include <QPainterPath>
#include <algorithm>
#include <cmath>
#include <map>

#include "app/figures/presets.h"
#include "compute/error.h"
#include "compute/spec.h"

namespace attn::fig {
namespace {

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  double frac(double v) const {
    return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
               : (v - lo) / (hi - lo);
  }
};

// Linear from zero for non-negative data spanning under two decades; log otherwise.
Axis make_axis(std::vector<double> v, bool allow_log, bool from_zero) {
  Axis a;
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) v = {0, 1};
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  // Values below 1e-9 of the largest are rounding noise (dense against itself), not data.
  std::vector<double> pos;
  for (double x : v)
    if (x > std::abs(hi) * 1e-9) pos.push_back(x);
  if (allow_log && !pos.empty()) {
    const double plo = *std::min_element(pos.begin(), pos.end());
    if (hi / plo > 100) {
      a.log = true;
      a.lo = std::pow(10.0, std::floor(std::log10(plo)));
      a.hi = std::pow(10.0, std::ceil(std::log10(hi * 1.5)));
      if (a.hi <= a.lo) a.hi = a.lo * 10;
      a.ticks = log_ticks(a.lo, a.hi);
      return a;
    }
  }
  if (from_zero) lo = std::min(lo, 0.0);
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::abs(lo) * 0.1);
  a.ticks = nice_ticks(lo, hi, 5);
  const double step = a.ticks.size() > 1 ? a.ticks[1] - a.ticks[0] : hi - lo;
  a.lo = std::min(lo, a.ticks.front());
  a.hi = std::max(hi, a.ticks.back());
  if (a.ticks.back() < hi - 1e-12) {
    a.ticks.push_back(a.ticks.back() + step);
    a.hi = a.ticks.back();
  }
  return a;
}

double value(const TradeoffPoint& p, const std::string& name) {
  if (name == "density") return p.density;
  if (name == "seconds") return p.kernel_seconds * 1e3;
  if (name == "flops") return p.flops;
  if (name == "rel_error") return p.rel_error;
  if (name == "mass_recall") return p.mass_recall;
  if (name == "row_kl") return p.row_kl;
  if (name == "next_token_kl") return p.next_token_kl;
  if (name == "top1_agreement") return p.top1_agreement;
  return NAN;
}

QString axis_title(const std::string& name) {
  if (name == "density") return "Density (kept / visible entries)";
  if (name == "seconds") return "Attention kernel time (ms, all layers)";
  if (name == "flops") return "Counted FLOPs";
  if (name == "rel_error") return "Relative output error";
  if (name == "mass_recall") return "Dense mass kept (recall)";
  if (name == "row_kl") return "Attention-row KL (nats)";
  if (name == "next_token_kl") return "Next-token KL vs dense (nats)";
  if (name == "top1_agreement") return "Top-1 agreement";
  return qs(name);
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

void draw_marker(QPainter& p, QPointF at, int shape, QColor col, double r) {
  p.save();
  p.setPen(QPen(Qt::white, 0.4));
  p.setBrush(col);
  switch (shape % 4) {
    case 0:
      p.drawEllipse(at, r, r);
      break;
    case 1:
      p.drawRect(QRectF(at.x() - r * 0.9, at.y() - r * 0.9, r * 1.8, r * 1.8));
      break;
    case 2: {
      const QPointF tri[3] = {{at.x(), at.y() - r * 1.15},
                              {at.x() - r, at.y() + r * 0.75},
                              {at.x() + r, at.y() + r * 0.75}};
      p.drawPolygon(tri, 3);
      break;
    }
    default: {
      const QPointF dia[4] = {{at.x(), at.y() - r * 1.2},
                              {at.x() + r, at.y()},
                              {at.x(), at.y() + r * 1.2},
                              {at.x() - r, at.y()}};
      p.drawPolygon(dia, 4);
    }
  }
  p.restore();
}

}  // namespace

double paint_tradeoff(FigurePainter& c, const QRectF& area, const FigureData& d) {
  const FigureStyle& s = c.style();
  const auto& pts = d.tradeoff;
  if (pts.empty()) return area.top();
  const std::string xname = d.settings.tradeoff_x.empty() ? "density" : d.settings.tradeoff_x;
  std::vector<std::string> ynames = {d.settings.tradeoff_y.empty() ? "rel_error"
                                                                   : d.settings.tradeoff_y};
  for (const std::string& extra : {"next_token_kl", "mass_recall"}) {
    bool any = false;
    for (const auto& p : pts) any = any || std::isfinite(value(p, extra));
    if (any && extra != ynames[0]) {
      ynames.push_back(extra);
      break;
    }
  }
  // Series by pattern id, in order of first appearance; labels show what varies in each.
  std::vector<std::string> groups;
  for (const auto& p : pts)
    if (std::find(groups.begin(), groups.end(), p.pattern) == groups.end())
      groups.push_back(p.pattern);
  std::vector<std::vector<size_t>> vary(groups.size());
  std::vector<QString> legend(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<const TradeoffPoint*> members;
    for (const auto& p : pts)
      if (p.pattern == groups[g]) members.push_back(&p);
    vary[g] = varying(members);
    legend[g] = qs(groups[g]);
    const auto ps = spec_params(members.front()->spec);
    QString fixed_params, names;
    for (size_t i = 0; i < ps.size(); ++i) {
      const bool v = std::find(vary[g].begin(), vary[g].end(), i) != vary[g].end();
      QString& dst = v ? names : fixed_params;
      dst += (dst.isEmpty() ? "" : ", ") + qs(v ? ps[i].first : ps[i].first + "=" + ps[i].second);
    }
    // "block_topk (k; block=4)": what the point labels show, then what is fixed.
    const QString inner =
        names + (names.isEmpty() || fixed_params.isEmpty() ? "" : "; ") + fixed_params;
    if (!inner.isEmpty()) legend[g] += " (" + inner + ")";
  }

  const double lh_tick = c.line_height(s.tick_pt), lh_label = c.line_height(s.label_pt);
  double legend_w = 0;
  for (const auto& l : legend) legend_w = std::max(legend_w, c.text_width(l, s.tick_pt));
  legend_w = std::min(legend_w, area.width() * 0.3);
  legend_w += 16;
  const int P = int(ynames.size());
  const double gap = 16;
  const double left = lh_label + 4 + c.text_width("0.000", s.tick_pt) + 4;
  const double bottom = 3 + lh_tick + 4 + lh_label + 2;
  const double pw = (area.width() - P * left - (P - 1) * gap - legend_w - 8) / P;
  const double ph = area.height() - bottom - 4;
  std::vector<double> xs;
  for (const auto& p : pts) xs.push_back(value(p, xname));
  const Axis ax = make_axis(xs, xname != "density", true);

  for (int k = 0; k < P; ++k) {
    const std::string& yname = ynames[size_t(k)];
    std::vector<double> ys;
    for (const auto& p : pts) ys.push_back(value(p, yname));
    const Axis ay = make_axis(ys, true, yname != "mass_recall");
    const QRectF r(area.left() + left + k * (left + pw + gap), area.top() + 4, pw, ph);
    auto map = [&](double x, double y) {
      return QPointF(r.left() + ax.frac(x) * r.width(), r.bottom() - ay.frac(y) * r.height());
    };
    for (double t : ay.ticks) {
      const double y = r.bottom() - ay.frac(t) * r.height();
      c.line({r.left(), y}, {r.right(), y}, kGrid, s.line_pt * 0.8);
      c.line({r.left() - 2, y}, {r.left(), y});
      c.text({r.left() - 3, y}, tick_label(t), s.tick_pt, 1, 0);
    }
    for (double t : ax.ticks) {
      const double x = r.left() + ax.frac(t) * r.width();
      c.line({x, r.top()}, {x, r.bottom()}, kGrid, s.line_pt * 0.8);
      c.line({x, r.bottom()}, {x, r.bottom() + 2});
      c.text({x, r.bottom() + 3}, tick_label(t), s.tick_pt, 0, -1);
    }
    c.rect_outline(r);
    c.text({r.center().x(), r.bottom() + 3 + lh_tick + 4}, axis_title(xname), s.label_pt, 0, -1);
    c.text({r.left() - left + 1, r.center().y()}, axis_title(yname) + (ay.log ? " (log)" : ""),
           s.label_pt, 0, -1, kText, false, -90);
    QPainter& p = c.painter();
    p.save();
    p.setClipRect(r.adjusted(-4, -4, 4, 4));
    std::vector<QRectF> taken;  // label boxes drawn so far: a label that would overlap is skipped
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<std::pair<double, const TradeoffPoint*>> series;
      for (const auto& pt : pts) {
        const double x = value(pt, xname), y = value(pt, yname);
        if (pt.pattern != groups[g] || !std::isfinite(x) || !std::isfinite(y)) continue;
        if ((ay.log && y < ay.lo) || (ax.log && x < ax.lo)) continue;
        series.push_back({x, &pt});
      }
      std::sort(series.begin(), series.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
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
      for (const auto& [x, pt] : series) {
        const QPointF q = map(x, value(*pt, yname));
        draw_marker(p, q, int(g), col, 2.6);
        taken.push_back(QRectF(q.x() - 2.6, q.y() - 2.6, 5.2, 5.2));
      }
      for (const auto& [x, pt] : series) {
        const QPointF q = map(x, value(*pt, yname));
        const QString lab = point_label(*pt, vary[g]);
        if (lab.isEmpty()) continue;
        const double lw = c.text_width(lab, s.tick_pt - 1), lh = c.line_height(s.tick_pt - 1);
        // First free spot among: upper right, lower right, upper left, lower left.
        for (const QPointF off : {QPointF(3.5, -2.5 - lh), QPointF(3.5, 2.5),
                                  QPointF(-3.5 - lw, -2.5 - lh), QPointF(-3.5 - lw, 2.5)}) {
          const QRectF box(q + off, QSizeF(lw, lh));
          bool free = r.adjusted(-2, -2, 2, 2).contains(box);
          for (const QRectF& t : taken) free = free && !t.intersects(box);
          if (!free) continue;
          c.text(box.topLeft(), lab, s.tick_pt - 1, -1, -1, col.darker(130));
          taken.push_back(box);
          break;
        }
      }
    }
    p.restore();
  }
  // Legend to the right of the last panel.
  const double lx = area.right() - legend_w + 6;
  double ly = area.top() + 8;
  for (size_t g = 0; g < groups.size(); ++g) {
    draw_marker(c.painter(), {lx + 3, ly}, int(g), series_color(int(g)), 2.6);
    c.text({lx + 10, ly}, c.elide(legend[g], s.tick_pt, legend_w - 10), s.tick_pt, -1, 0);
    ly += lh_tick + 3;
  }
  return area.bottom();
}

}  // namespace attn::fig
