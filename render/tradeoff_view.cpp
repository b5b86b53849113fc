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

bool overlaps(const ImVec4& a, const ImVec4& b) {
  return a.x < b.z && b.x < a.z && a.y < b.w && b.y < a.w;
}

}  // namespace

void Canvas::build_tradeoff(float x0, float y0, float x1, float y1) {
  const TradeoffDoc& t = doc_->tradeoff;
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  static const char* xs[] = {"density", "time (ms)"};
  static const char* ys[] = {"output rel. error", "mass recall", "next-token KL"};
  ImGui::TextUnformatted("x:");
  for (int i = 0; i < 2; ++i) {
    ImGui::SameLine();
    if (ImGui::RadioButton(xs[i], settings_.tradeoff_x == i)) settings_.tradeoff_x = i;
  }
  ImGui::SameLine(0, 20);
  ImGui::TextUnformatted("y:");
  for (int i = 0; i < 3; ++i) {
    ImGui::SameLine();
    if (ImGui::RadioButton((std::string(ys[i]) + "##y").c_str(), settings_.tradeoff_y == i))
      settings_.tradeoff_y = i;
  }
  const float controls_bottom = ImGui::GetItemRectMax().y;
  if (t.points.empty()) {
    ImGui::TextDisabled("Measuring the variants...");
    return;
  }
  auto X = [&](const TradeoffMark& p) {
    return settings_.tradeoff_x == 0 ? p.density : p.seconds * 1e3;
  };
  auto Y = [&](const TradeoffMark& p) {
    return settings_.tradeoff_y == 0 ? p.rel_error : settings_.tradeoff_y == 1 ? p.recall : p.kl;
  };
  const bool higher_better = settings_.tradeoff_y == 1;
  const bool dark = settings_.dark;
  const ImU32 variant_col = dark ? IM_COL32(90, 170, 255, 255) : IM_COL32(20, 100, 200, 255);
  const ImU32 sweep_col = dark ? IM_COL32(160, 160, 170, 220) : IM_COL32(115, 115, 125, 230);
  const ImU32 front_col = dark ? IM_COL32(255, 150, 30, 200) : IM_COL32(210, 105, 0, 230);
  const ImU32 grid_col = dark ? IM_COL32(128, 128, 128, 40) : IM_COL32(100, 100, 100, 45);
  double xl = INFINITY, xh = -INFINITY, yl = INFINITY, yh = -INFINITY;
  for (const auto& p : t.points) {
    if (!std::isfinite(X(p)) || !std::isfinite(Y(p))) continue;
    xl = std::min(xl, X(p)), xh = std::max(xh, X(p)), yl = std::min(yl, Y(p)),
    yh = std::max(yh, Y(p));
  }
  if (!std::isfinite(xl)) return;
  const float line = ImGui::GetTextLineHeight();
  ImDrawList* dl = ImGui::GetWindowDrawList();

  // Legend: what coloured and grey points are, and the front. It shares the line of the y-axis
  // title when both fit, else it takes a line of its own above.
  struct Entry {
    ImU32 col;
    bool is_line;
    std::string text;
  };
  const std::vector<Entry> legend = {
      {variant_col, false, "the session's variants"},
      {sweep_col, false, "automatic sweep of each variant's first parameter"},
      {front_col, true, "Pareto front"}};
  const float L = x0 + 70, R = x1 - 20;
  float legend_w = 0;
  for (const Entry& e : legend) legend_w += 22 + ImGui::CalcTextSize(e.text.c_str()).x + 18;
  const float ytitle_w = ImGui::CalcTextSize(ys[settings_.tradeoff_y]).x;
  const bool legend_own_line = ytitle_w + 24 + legend_w > R - L;
  const float legend_y = controls_bottom + 6;
  const float T = legend_y + line * (legend_own_line ? 2.2f : 1.2f) + 4, B = y1 - line * 3;
  {
    float lx = legend_own_line ? L : R - legend_w;
    const float ly = legend_own_line ? legend_y : T - line - 4;
    for (const Entry& e : legend) {
      const float cy = ly + line / 2;
      if (e.is_line)
        dl->AddLine(ImVec2(lx, cy), ImVec2(lx + 16, cy), e.col, 2);
      else
        dl->AddCircleFilled(ImVec2(lx + 8, cy), 5, e.col);
      const float tx = lx + 22, tw = ImGui::CalcTextSize(e.text.c_str()).x;
      note_fit(e.text, R + 20 - tx);
      dl->AddText(ImVec2(tx, ly), text_color(), e.text.c_str());
      mark("tradeoff.legend", e.text, lx, ly, tx + tw, ly + line);
      lx = tx + tw + 18;
    }
  }

  // Axes from 0 to a tick past the largest value, ticks on 1-2-5 steps.
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
  auto sx = [&](double v) { return float(L + (v - xl) / (xh - xl) * (R - L)); };
  auto sy = [&](double v) { return float(B - (v - yl) / (yh - yl) * (B - T)); };
  dl->AddRect(ImVec2(L, T), ImVec2(R, B), frame_color());
  for (double k = std::ceil(xl / xstep - 1e-9); k * xstep <= xh + xstep * 1e-6; k += 1) {
    const double v = k * xstep;
    const std::string a = fmt_tick(v, xstep);
    const float w = ImGui::CalcTextSize(a.c_str()).x;
    dl->AddText(ImVec2(sx(v) - w / 2, B + 4), dim_text_color(), a.c_str());
    mark("tradeoff.xtick", a, sx(v) - w / 2, B + 4, sx(v) + w / 2, B + 4 + line);
    dl->AddLine(ImVec2(sx(v), T), ImVec2(sx(v), B), grid_col);
  }
  for (double k = std::ceil(yl / ystep - 1e-9); k * ystep <= yh + ystep * 1e-6; k += 1) {
    const double v = k * ystep;
    const std::string b = fmt_tick(v, ystep);
    const float w = ImGui::CalcTextSize(b.c_str()).x;
    note_fit(b, L - 6 - x0);
    dl->AddText(ImVec2(L - 6 - w, sy(v) - line / 2), dim_text_color(), b.c_str());
    mark("tradeoff.ytick", b, L - 6 - w, sy(v) - line / 2, L - 6, sy(v) + line / 2);
    dl->AddLine(ImVec2(L, sy(v)), ImVec2(R, sy(v)), grid_col);
  }
  {
    const char* xt = xs[settings_.tradeoff_x];
    dl->AddText(ImVec2((L + R - ImGui::CalcTextSize(xt).x) / 2, B + line + 8), text_color(), xt);
    dl->AddText(ImVec2(L, T - line - 4), text_color(), ys[settings_.tradeoff_y]);
  }

  // Pareto front: sorted by x, keep points that improve y.
  std::vector<const TradeoffMark*> pts;
  for (const auto& p : t.points)
    if (std::isfinite(X(p)) && std::isfinite(Y(p))) pts.push_back(&p);
  std::stable_sort(pts.begin(), pts.end(), [&](auto* a, auto* b) { return X(*a) < X(*b); });
  std::vector<ImVec2> front;
  double best = higher_better ? -INFINITY : INFINITY;
  for (auto* p : pts) {
    const double y = Y(*p);
    if (higher_better ? y > best : y < best) {
      best = y;
      front.push_back(ImVec2(sx(X(*p)), sy(y)));
    }
  }
  if (front.size() > 1) dl->AddPolyline(front.data(), int(front.size()), front_col, 0, 2);
  auto centre = [&](const TradeoffMark* p) { return ImVec2(sx(X(*p)), sy(Y(*p))); };
  // Grey sweep points first, the session's variants on top.
  for (auto* p : pts)
    if (!p->shown) dl->AddCircleFilled(centre(p), 4.f, sweep_col);
  std::vector<const TradeoffMark*> shown;
  for (const auto& p : t.points)
    if (p.shown && std::isfinite(X(p)) && std::isfinite(Y(p))) shown.push_back(&p);
  for (auto* p : shown) dl->AddCircleFilled(centre(p), 6.f, variant_col);

  // Variants closer than a few pixels form one cluster with one label ("dense (+1)").
  const float near_px = 10;
  std::vector<int> cluster(shown.size());
  std::iota(cluster.begin(), cluster.end(), 0);
  for (size_t i = 0; i < shown.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const ImVec2 a = centre(shown[i]), b = centre(shown[j]);
      if (std::hypot(a.x - b.x, a.y - b.y) < near_px) {
        const int from = cluster[i], to = cluster[j];
        for (int& c : cluster)
          if (c == from) c = to;
      }
    }
  // Labels placed greedily, top to bottom: right of the point, else left, else moved up or down
  // by whole lines (with a leader line) until no label or point is covered.
  std::vector<int> heads;
  for (size_t i = 0; i < shown.size(); ++i)
    if (cluster[i] == int(i)) heads.push_back(int(i));
  std::stable_sort(heads.begin(), heads.end(), [&](int a, int b) {
    return centre(shown[size_t(a)]).y < centre(shown[size_t(b)]).y;
  });
  std::vector<ImVec4> placed;
  struct Label {
    ImVec4 box;
    int head;
  };
  std::vector<Label> labels;
  const float max_w = std::max(60.f, (R - L) * 0.4f);
  for (int hd : heads) {
    const ImVec2 c = centre(shown[size_t(hd)]);
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
        const ImVec2 o = centre(shown[i]);
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
      dl->AddLine(c, ImVec2(ex, (box.y + box.w) / 2), dim_text_color());
    }
    note_fit(text, R - box.x);
    dl->AddText(ImVec2(box.x, box.y), text_color(), text.c_str());
    mark("tradeoff.label", text, box.x, box.y, box.z, box.w);
  }

  // Hover: every point near the cursor, or every member of a hovered label's cluster.
  const ImVec2 m = ImGui::GetIO().MousePos;
  std::vector<const TradeoffMark*> hov;
  for (const Label& lb : labels)
    if (m.x >= lb.box.x && m.x < lb.box.z && m.y >= lb.box.y && m.y < lb.box.w)
      for (size_t i = 0; i < shown.size(); ++i)
        if (cluster[i] == lb.head) hov.push_back(shown[i]);
  if (hov.empty()) {
    for (auto* p : shown) {
      const ImVec2 c = centre(p);
      if (std::hypot(m.x - c.x, m.y - c.y) < 8) hov.push_back(p);
    }
    for (auto* p : pts) {
      const ImVec2 c = centre(p);
      if (!p->shown && std::hypot(m.x - c.x, m.y - c.y) < 8) hov.push_back(p);
    }
  }
  if (!hov.empty()) {
    ImGui::BeginTooltip();
    for (size_t i = 0; i < hov.size(); ++i) {
      const TradeoffMark* p = hov[i];
      if (i) ImGui::Separator();
      ImGui::TextUnformatted(p->label.c_str());
      ImGui::TextDisabled("%s", p->shown ? "variant of the session" : "automatic sweep point");
      ImGui::Text("density %.4f   time %.3f ms (select %.3f + kernel %.3f)", p->density,
                  p->seconds * 1e3, p->select_seconds * 1e3,
                  (p->seconds - p->select_seconds) * 1e3);
      ImGui::Text("error %.4g   recall %.4f   KL %.4g", p->rel_error, p->recall, p->kl);
    }
    ImGui::EndTooltip();
  }
}

}  // namespace attn::render
