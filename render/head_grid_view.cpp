// Head grid: layers x heads coloured by a chosen metric; clicking a head selects it everywhere.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "render/canvas.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::render {

void Canvas::build_head_grid(float x0, float y0, float x1, float y1) {
  const HeadGridDoc& g = doc_->grid;
  if (g.layers == 0 || g.heads == 0 || g.metrics.empty()) {
    ImGui::SetCursorScreenPos(ImVec2(x0, y0));
    ImGui::TextDisabled("Comparing every head with the dense reference...");
    return;
  }
  settings_.grid_metric = std::clamp(settings_.grid_metric, 0, int(g.metrics.size()) - 1);
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  ImGui::TextUnformatted("Colour by");
  for (size_t m = 0; m < g.metrics.size(); ++m) {
    ImGui::SameLine();
    if (ImGui::RadioButton(g.metrics[m].c_str(), settings_.grid_metric == int(m)))
      settings_.grid_metric = int(m);
  }
  if (!g.variant.empty()) {
    ImGui::SameLine(0, 20);
    ImGui::TextDisabled("error and recall of %s", g.variant.c_str());
  }
  const std::vector<float>& v = g.values[size_t(settings_.grid_metric)];
  float lo = INFINITY, hi = -INFINITY;
  for (float x : v)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!(hi > lo)) hi = lo + 1;
  const float line = ImGui::GetTextLineHeight();
  const float top = y0 + line * 2.5f, left = x0 + 70;
  const float cell =
      std::min((x1 - left - 120) / float(g.heads), (y1 - top - line * 2) / float(g.layers));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 m = ImGui::GetIO().MousePos;
  for (int l = 0; l < g.layers; ++l) {
    const std::string s = "layer " + std::to_string(l);
    dl->AddText(ImVec2(x0, top + (float(l) + 0.5f) * cell - line / 2), text_color(), s.c_str());
    for (int h = 0; h < g.heads; ++h) {
      const float cx = left + float(h) * cell, cy = top + float(l) * cell;
      const float x = v[size_t(l * g.heads + h)];
      const float t = std::isfinite(x) ? (x - lo) / (hi - lo) : 0;
      dl->AddRectFilled(ImVec2(cx + 1, cy + 1), ImVec2(cx + cell - 1, cy + cell - 1),
                        colormap_u32(settings_.colormap, t));
      const bool sel = doc_->heat.layer == l && doc_->heat.head == h;
      if (sel)
        dl->AddRect(ImVec2(cx, cy), ImVec2(cx + cell, cy + cell), IM_COL32(255, 170, 40, 255), 0, 0,
                    3);
      if (cell > line * 3) {
        const std::string n = fmt_num(x);
        const ImVec2 sz = ImGui::CalcTextSize(n.c_str());
        dl->AddText(ImVec2(cx + (cell - sz.x) / 2, cy + (cell - sz.y) / 2),
                    t > 0.6f ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255), n.c_str());
      }
      if (m.x >= cx && m.x < cx + cell && m.y >= cy && m.y < cy + cell &&
          !ImGui::IsAnyItemHovered()) {
        ImGui::SetTooltip("layer %d, head %d\n%s = %s\nclick to open this head", l, h,
                          g.metrics[size_t(settings_.grid_metric)].c_str(), fmt_num(x).c_str());
        if (ImGui::IsMouseClicked(0) && callbacks_.select_head) callbacks_.select_head(l, h);
      }
    }
  }
  for (int h = 0; h < g.heads; ++h) {
    const std::string s = "head " + std::to_string(h);
    const ImVec2 sz = ImGui::CalcTextSize(s.c_str());
    dl->AddText(ImVec2(left + (float(h) + 0.5f) * cell - sz.x / 2, top - line - 2), text_color(),
                s.c_str());
  }
  // Scale.
  const float bx = left + float(g.heads) * cell + 24, by0 = top,
              by1 = top + std::min(cell * float(g.layers), 300.f);
  for (int i = 0; i < 64; ++i) {
    const float t = 1 - (float(i) + 0.5f) / 64;
    dl->AddRectFilled(ImVec2(bx, by0 + (by1 - by0) * float(i) / 64),
                      ImVec2(bx + 16, by0 + (by1 - by0) * float(i + 1) / 64 + 0.5f),
                      colormap_u32(settings_.colormap, t));
  }
  dl->AddText(ImVec2(bx + 20, by0 - line / 2), text_color(), fmt_num(hi).c_str());
  dl->AddText(ImVec2(bx + 20, by1 - line / 2), text_color(), fmt_num(lo).c_str());
}

}  // namespace attn::render
