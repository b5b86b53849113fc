// Trade-off view: one point per variant setting (x: density or measured time, y: output error,
// mass recall or next-token KL) with the Pareto front; hovering a point names its setting.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "render/canvas.h"
#include "render/draw_util.h"

namespace attn::render {

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
  double xl = INFINITY, xh = -INFINITY, yl = INFINITY, yh = -INFINITY;
  for (const auto& p : t.points) {
    if (!std::isfinite(X(p)) || !std::isfinite(Y(p))) continue;
    xl = std::min(xl, X(p)), xh = std::max(xh, X(p)), yl = std::min(yl, Y(p)),
    yh = std::max(yh, Y(p));
  }
  if (!std::isfinite(xl)) return;
  xl = std::min(xl, 0.0);
  yl = std::min(yl, 0.0);
  if (xh <= xl) xh = xl + 1;
  if (yh <= yl) yh = yl + 1;
  xh += (xh - xl) * 0.05;
  yh += (yh - yl) * 0.08;
  const float line = ImGui::GetTextLineHeight();
  const float L = x0 + 70, R = x1 - 20, T = y0 + line * 3, B = y1 - line * 3;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  auto sx = [&](double v) { return float(L + (v - xl) / (xh - xl) * (R - L)); };
  auto sy = [&](double v) { return float(B - (v - yl) / (yh - yl) * (B - T)); };
  dl->AddRect(ImVec2(L, T), ImVec2(R, B), frame_color());
  for (int i = 0; i <= 4; ++i) {
    const double vx = xl + (xh - xl) * i / 4, vy = yl + (yh - yl) * i / 4;
    const std::string a = fmt_num(vx), b = fmt_num(vy);
    dl->AddText(ImVec2(sx(vx) - ImGui::CalcTextSize(a.c_str()).x / 2, B + 4), dim_text_color(),
                a.c_str());
    dl->AddText(ImVec2(L - 6 - ImGui::CalcTextSize(b.c_str()).x, sy(vy) - line / 2),
                dim_text_color(), b.c_str());
    dl->AddLine(ImVec2(L, sy(vy)), ImVec2(R, sy(vy)), IM_COL32(128, 128, 128, 40));
  }
  dl->AddText(ImVec2((L + R) / 2 - 30, B + line + 8), text_color(), xs[settings_.tradeoff_x]);
  dl->AddText(ImVec2(L, T - line - 4), text_color(), ys[settings_.tradeoff_y]);
  // Pareto front: sorted by x, keep points that improve y.
  std::vector<const TradeoffMark*> pts;
  for (const auto& p : t.points)
    if (std::isfinite(X(p)) && std::isfinite(Y(p))) pts.push_back(&p);
  std::sort(pts.begin(), pts.end(), [&](auto* a, auto* b) { return X(*a) < X(*b); });
  std::vector<ImVec2> front;
  double best = higher_better ? -INFINITY : INFINITY;
  for (auto* p : pts) {
    const double y = Y(*p);
    if (higher_better ? y > best : y < best) {
      best = y;
      front.push_back(ImVec2(sx(X(*p)), sy(y)));
    }
  }
  if (front.size() > 1)
    dl->AddPolyline(front.data(), int(front.size()), IM_COL32(255, 150, 30, 200), 0, 2);
  const ImVec2 m = ImGui::GetIO().MousePos;
  const TradeoffMark* hov = nullptr;
  for (auto* p : pts) {
    const ImVec2 c(sx(X(*p)), sy(Y(*p)));
    dl->AddCircleFilled(c, p->shown ? 6.f : 4.f,
                        p->shown ? IM_COL32(90, 170, 255, 255) : IM_COL32(160, 160, 170, 220));
    if (p->shown)
      dl->AddText(ImVec2(c.x + 8, c.y - line / 2), text_color(), clip_label(p->label, 28).c_str());
    if (std::hypot(m.x - c.x, m.y - c.y) < 8) hov = p;
  }
  if (hov) {
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(hov->label.c_str());
    ImGui::Text("density %.4f   time %.3f ms", hov->density, hov->seconds * 1e3);
    ImGui::Text("error %.4g   recall %.4f   KL %.4g", hov->rel_error, hov->recall, hov->kl);
    ImGui::EndTooltip();
  }
}

}  // namespace attn::render
