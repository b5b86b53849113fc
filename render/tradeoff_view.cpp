// Trade-off view: one point per variant setting (x: density or measured time, y: output error,
// mass recall or next-token KL) with the Pareto front. The session's variants are coloured and
// labelled (points closer than a few pixels share one label, the others listed on hover; labels
// that would collide move up or down with a leader line); grey points are the automatic sweep of
// each variant's first parameter, named on hover. Ticks fall on 1-2-5 steps.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "render/canvas.h"
#include "render/draw_util.h"

namespace attn::render {
namespace {

const char* kAxisX[] = {"density", "time (ms)"};
const char* kAxisY[] = {"output rel. error", "mass recall", "next-token KL"};

bool overlaps(const ImVec4& a, const ImVec4& b) {
  return a.x < b.z && b.x < a.z && a.y < b.w && b.y < a.w;
}

}  // namespace

// A placed label and the cluster (index of its first point in `shown`) it names.
struct TradeoffLabel {
  ImVec4 box;
  int head;
};

// The plot's frame, axes and colours: what every part of the view draws against.
struct TradeoffPlot {
  int x_axis = 0, y_axis = 0;  // settings' tradeoff_x / tradeoff_y
  ImU32 variant_col = 0, sweep_col = 0, front_col = 0, grid_col = 0;
  float line = 0;                         // text line height
  float L = 0, R = 0, T = 0, B = 0;       // plot rectangle
  double xl = 0, xh = 0, yl = 0, yh = 0;  // axis ranges (data ranges until the axes are set)
  double xstep = 1, ystep = 1;
  ImDrawList* dl = nullptr;

  double x(const TradeoffMark& p) const { return x_axis == 0 ? p.density : p.seconds * 1e3; }
  double y(const TradeoffMark& p) const {
    return y_axis == 0 ? p.rel_error : y_axis == 1 ? p.recall : p.kl;
  }
  bool finite(const TradeoffMark& p) const { return std::isfinite(x(p)) && std::isfinite(y(p)); }
  float sx(double v) const { return float(L + (v - xl) / (xh - xl) * (R - L)); }
  float sy(double v) const { return float(B - (v - yl) / (yh - yl) * (B - T)); }
  ImVec2 centre(const TradeoffMark* p) const { return ImVec2(sx(x(*p)), sy(y(*p))); }
};

namespace {

// Points closer than a few pixels form one cluster with one label ("dense (+1)"): each point's
// cluster is the index of its first member.
std::vector<int> cluster_nearby(const TradeoffPlot& plot,
                                const std::vector<const TradeoffMark*>& shown) {
  const float near_px = 10;
  std::vector<int> cluster(shown.size());
  std::iota(cluster.begin(), cluster.end(), 0);
  for (size_t i = 0; i < shown.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const ImVec2 a = plot.centre(shown[i]), b = plot.centre(shown[j]);
      if (std::hypot(a.x - b.x, a.y - b.y) < near_px) {
        const int from = cluster[i], to = cluster[j];
        for (int& c : cluster)
          if (c == from) c = to;
      }
    }
  return cluster;
}

// Hover: every point near the cursor, or every member of a hovered label's cluster.
void tradeoff_tooltip(const TradeoffPlot& plot, const std::vector<TradeoffLabel>& labels,
                      const std::vector<const TradeoffMark*>& shown,
                      const std::vector<int>& cluster,
                      const std::vector<const TradeoffMark*>& pts) {
  const ImVec2 m = ImGui::GetIO().MousePos;
  std::vector<const TradeoffMark*> hov;
  for (const TradeoffLabel& lb : labels)
    if (m.x >= lb.box.x && m.x < lb.box.z && m.y >= lb.box.y && m.y < lb.box.w)
      for (size_t i = 0; i < shown.size(); ++i)
        if (cluster[i] == lb.head) hov.push_back(shown[i]);
  if (hov.empty()) {
    for (auto* p : shown) {
      const ImVec2 c = plot.centre(p);
      if (std::hypot(m.x - c.x, m.y - c.y) < 8) hov.push_back(p);
    }
    for (auto* p : pts) {
      const ImVec2 c = plot.centre(p);
      if (!p->shown && std::hypot(m.x - c.x, m.y - c.y) < 8) hov.push_back(p);
    }
  }
  if (hov.empty()) return;
  ImGui::BeginTooltip();
  for (size_t i = 0; i < hov.size(); ++i) {
    const TradeoffMark* p = hov[i];
    if (i) ImGui::Separator();
    ImGui::TextUnformatted(p->label.c_str());
    ImGui::TextDisabled("%s", p->shown ? "variant of the session" : "automatic sweep point");
    ImGui::Text("density %.4f   time %.3f ms (select %.3f + kernel %.3f)", p->density,
                p->seconds * 1e3, p->select_seconds * 1e3, (p->seconds - p->select_seconds) * 1e3);
    ImGui::Text("error %.4g   recall %.4f   KL %.4g", p->rel_error, p->recall, p->kl);
  }
  ImGui::EndTooltip();
}

}  // namespace

void Canvas::build_tradeoff(float x0, float y0, float x1, float y1) {
  const TradeoffDoc& t = doc_->tradeoff;
  const float controls_bottom = build_tradeoff_axis_choice(x0, y0);
  if (t.points.empty()) {
    ImGui::TextDisabled("Measuring the variants...");
    return;
  }
  TradeoffPlot plot;
  plot.x_axis = settings_.tradeoff_x;
  plot.y_axis = settings_.tradeoff_y;
  const bool dark = settings_.dark;
  plot.variant_col = dark ? IM_COL32(90, 170, 255, 255) : IM_COL32(20, 100, 200, 255);
  plot.sweep_col = dark ? IM_COL32(160, 160, 170, 220) : IM_COL32(115, 115, 125, 230);
  plot.front_col = dark ? IM_COL32(255, 150, 30, 200) : IM_COL32(210, 105, 0, 230);
  plot.grid_col = dark ? IM_COL32(128, 128, 128, 40) : IM_COL32(100, 100, 100, 45);
  double xl = INFINITY, xh = -INFINITY, yl = INFINITY, yh = -INFINITY;
  for (const auto& p : t.points) {
    if (!plot.finite(p)) continue;
    xl = std::min(xl, plot.x(p)), xh = std::max(xh, plot.x(p)), yl = std::min(yl, plot.y(p)),
    yh = std::max(yh, plot.y(p));
  }
  if (!std::isfinite(xl)) return;
  plot.xl = xl, plot.xh = xh, plot.yl = yl, plot.yh = yh;
  plot.line = ImGui::GetTextLineHeight();
  plot.dl = ImGui::GetWindowDrawList();
  place_tradeoff_legend(plot, x0, x1, y1, controls_bottom);
  draw_tradeoff_axes(plot, x0);
  std::vector<const TradeoffMark*> pts, shown;
  draw_tradeoff_points(plot, pts, shown);
  const std::vector<int> cluster = cluster_nearby(plot, shown);
  const std::vector<TradeoffLabel> labels = place_tradeoff_labels(plot, shown, cluster);
  tradeoff_tooltip(plot, labels, shown, cluster, pts);
}

float Canvas::build_tradeoff_axis_choice(float x0, float y0) {
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  ImGui::TextUnformatted("x:");
  for (int i = 0; i < 2; ++i) {
    ImGui::SameLine();
    if (ImGui::RadioButton(kAxisX[i], settings_.tradeoff_x == i)) settings_.tradeoff_x = i;
  }
  ImGui::SameLine(0, 20);
  ImGui::TextUnformatted("y:");
  for (int i = 0; i < 3; ++i) {
    ImGui::SameLine();
    if (ImGui::RadioButton((std::string(kAxisY[i]) + "##y").c_str(), settings_.tradeoff_y == i))
      settings_.tradeoff_y = i;
  }
  return ImGui::GetItemRectMax().y;
}

void Canvas::place_tradeoff_legend(TradeoffPlot& plot, float x0, float x1, float y1,
                                   float controls_bottom) {
  // Legend: what coloured and grey points are, and the front. It shares the line of the y-axis
  // title when both fit, else it takes a line of its own above.
  struct Entry {
    ImU32 col;
    bool is_line;
    std::string text;
  };
  const std::vector<Entry> legend = {
      {plot.variant_col, false, "the session's variants"},
      {plot.sweep_col, false, "automatic sweep of each variant's first parameter"},
      {plot.front_col, true, "Pareto front"}};
  const float line = plot.line;
  const float L = x0 + 70, R = x1 - 20;
  float legend_w = 0;
  for (const Entry& e : legend) legend_w += 22 + ImGui::CalcTextSize(e.text.c_str()).x + 18;
  const float ytitle_w = ImGui::CalcTextSize(kAxisY[plot.y_axis]).x;
  const bool legend_own_line = ytitle_w + 24 + legend_w > R - L;
  const float legend_y = controls_bottom + 6;
  const float T = legend_y + line * (legend_own_line ? 2.2f : 1.2f) + 4, B = y1 - line * 3;
  plot.L = L, plot.R = R, plot.T = T, plot.B = B;
  float lx = legend_own_line ? L : R - legend_w;
  const float ly = legend_own_line ? legend_y : T - line - 4;
  for (const Entry& e : legend) {
    const float cy = ly + line / 2;
    if (e.is_line)
      plot.dl->AddLine(ImVec2(lx, cy), ImVec2(lx + 16, cy), e.col, 2);
    else
      plot.dl->AddCircleFilled(ImVec2(lx + 8, cy), 5, e.col);
    const float tx = lx + 22, tw = ImGui::CalcTextSize(e.text.c_str()).x;
    note_fit(e.text, R + 20 - tx);
    plot.dl->AddText(ImVec2(tx, ly), text_color(), e.text.c_str());
    mark("tradeoff.legend", e.text, lx, ly, tx + tw, ly + line);
    lx = tx + tw + 18;
  }
}

void Canvas::draw_tradeoff_axes(TradeoffPlot& plot, float x0) {
  // Axes from 0 to a tick past the largest value, ticks on 1-2-5 steps.
  const float L = plot.L, R = plot.R, T = plot.T, B = plot.B, line = plot.line;
  double &xl = plot.xl, &xh = plot.xh, &yl = plot.yl, &yh = plot.yh;
  xl = std::min(xl, 0.0);
  yl = std::min(yl, 0.0);
  if (xh <= xl) xh = xl + 1;
  if (yh <= yl) yh = yl + 1;
  const double xstep = nice_step_real((xh - xl) * 1.04, std::max(2, int((R - L) / (line * 6))));
  const double ystep = nice_step_real((yh - yl) * 1.06, std::max(2, int((B - T) / (line * 5))));
  xh = std::ceil(xh * 1.02 / xstep) * xstep;
  yh = std::ceil(yh * 1.04 / ystep) * ystep;
  xl = std::floor(xl / xstep) * xstep;
  yl = std::floor(yl / ystep) * ystep;
  plot.xstep = xstep;
  plot.ystep = ystep;
  ImDrawList* dl = plot.dl;
  dl->AddRect(ImVec2(L, T), ImVec2(R, B), frame_color());
  for (double k = std::ceil(xl / xstep - 1e-9); k * xstep <= xh + xstep * 1e-6; k += 1) {
    const double v = k * xstep;
    const std::string a = fmt_tick(v, xstep);
    const float w = ImGui::CalcTextSize(a.c_str()).x;
    dl->AddText(ImVec2(plot.sx(v) - w / 2, B + 4), dim_text_color(), a.c_str());
    mark("tradeoff.xtick", a, plot.sx(v) - w / 2, B + 4, plot.sx(v) + w / 2, B + 4 + line);
    dl->AddLine(ImVec2(plot.sx(v), T), ImVec2(plot.sx(v), B), plot.grid_col);
  }
  for (double k = std::ceil(yl / ystep - 1e-9); k * ystep <= yh + ystep * 1e-6; k += 1) {
    const double v = k * ystep;
    const std::string b = fmt_tick(v, ystep);
    const float w = ImGui::CalcTextSize(b.c_str()).x;
    note_fit(b, L - 6 - x0);
    dl->AddText(ImVec2(L - 6 - w, plot.sy(v) - line / 2), dim_text_color(), b.c_str());
    mark("tradeoff.ytick", b, L - 6 - w, plot.sy(v) - line / 2, L - 6, plot.sy(v) + line / 2);
    dl->AddLine(ImVec2(L, plot.sy(v)), ImVec2(R, plot.sy(v)), plot.grid_col);
  }
  const char* xt = kAxisX[plot.x_axis];
  dl->AddText(ImVec2((L + R - ImGui::CalcTextSize(xt).x) / 2, B + line + 8), text_color(), xt);
  dl->AddText(ImVec2(L, T - line - 4), text_color(), kAxisY[plot.y_axis]);
}

void Canvas::draw_tradeoff_points(const TradeoffPlot& plot, std::vector<const TradeoffMark*>& pts,
                                  std::vector<const TradeoffMark*>& shown) {
  // Pareto front: sorted by x, keep points that improve y.
  const std::vector<TradeoffMark>& points = doc_->tradeoff.points;
  const bool higher_better = plot.y_axis == 1;
  for (const auto& p : points)
    if (plot.finite(p)) pts.push_back(&p);
  std::stable_sort(pts.begin(), pts.end(),
                   [&](auto* a, auto* b) { return plot.x(*a) < plot.x(*b); });
  std::vector<ImVec2> front;
  double best = higher_better ? -INFINITY : INFINITY;
  for (auto* p : pts) {
    const double y = plot.y(*p);
    if (higher_better ? y > best : y < best) {
      best = y;
      front.push_back(ImVec2(plot.sx(plot.x(*p)), plot.sy(y)));
    }
  }
  if (front.size() > 1) plot.dl->AddPolyline(front.data(), int(front.size()), plot.front_col, 0, 2);
  // Grey sweep points first, the session's variants on top.
  for (auto* p : pts)
    if (!p->shown) plot.dl->AddCircleFilled(plot.centre(p), 4.f, plot.sweep_col);
  for (const auto& p : points)
    if (p.shown && plot.finite(p)) shown.push_back(&p);
  for (auto* p : shown) plot.dl->AddCircleFilled(plot.centre(p), 6.f, plot.variant_col);
}

std::vector<TradeoffLabel> Canvas::place_tradeoff_labels(
    const TradeoffPlot& plot, const std::vector<const TradeoffMark*>& shown,
    const std::vector<int>& cluster) {
  // Labels placed greedily, top to bottom: right of the point, else left, else moved up or down
  // by whole lines (with a leader line) until no label or point is covered.
  const float L = plot.L, R = plot.R, T = plot.T, B = plot.B, line = plot.line;
  std::vector<int> heads;
  for (size_t i = 0; i < shown.size(); ++i)
    if (cluster[i] == int(i)) heads.push_back(int(i));
  std::stable_sort(heads.begin(), heads.end(), [&](int a, int b) {
    return plot.centre(shown[size_t(a)]).y < plot.centre(shown[size_t(b)]).y;
  });
  std::vector<ImVec4> placed;
  std::vector<TradeoffLabel> labels;
  const float max_w = std::max(60.f, (R - L) * 0.4f);
  for (int hd : heads) {
    const ImVec2 c = plot.centre(shown[size_t(hd)]);
    int members = 0;
    for (int cl : cluster) members += cl == hd;
    std::string text = fit_label(shown[size_t(hd)]->label, max_w);
    if (members > 1) text += " (+" + std::to_string(members - 1) + ")";
    const float w = ImGui::CalcTextSize(text.c_str()).x;
    auto free_box = [&](const ImVec4& b) {
      if (b.x < L + 2 || b.z > R - 2 || b.y < T + 2 || b.w > B - 2) return false;
      for (const ImVec4& o : placed)
        if (overlaps(b, o)) return false;
      for (size_t i = 0; i < shown.size(); ++i) {
        if (cluster[i] == hd) continue;
        const ImVec2 o = plot.centre(shown[i]);
        if (overlaps(b, ImVec4(o.x - 6, o.y - 6, o.x + 6, o.y + 6))) return false;
      }
      return true;
    };
    ImVec4 box(c.x + 9, c.y - line / 2, c.x + 9 + w, c.y + line / 2);
    bool found = false;
    for (int step = 0; step <= 12 && !found; ++step) {
      const float dy = float((step + 1) / 2) * (step % 2 ? -1.f : 1.f) * (line + 2);
      for (int side = 0; side < 2 && !found; ++side) {
        const float bx = side == 0 ? c.x + 9 : c.x - 9 - w;
        const ImVec4 b(bx, c.y - line / 2 + dy, bx + w, c.y + line / 2 + dy);
        if (free_box(b)) {
          box = b;
          found = true;
        }
      }
    }
    placed.push_back(box);
    labels.push_back({box, hd});
    if (std::abs((box.y + box.w) / 2 - c.y) > 1) {
      const float ex = box.x > c.x ? box.x - 1 : box.z + 1;
      plot.dl->AddLine(c, ImVec2(ex, (box.y + box.w) / 2), dim_text_color());
    }
    note_fit(text, R - box.x);
    plot.dl->AddText(ImVec2(box.x, box.y), text_color(), text.c_str());
    mark("tradeoff.label", text, box.x, box.y, box.z, box.w);
  }
  return labels;
}

}  // namespace attn::render
