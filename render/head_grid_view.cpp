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
  const size_t metric = size_t(settings_.grid_metric);
  if (settings_.grid_variant < 0 || settings_.grid_variant >= int(g.variants.size()))
    settings_.grid_variant = g.variant;
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  ImGui::TextUnformatted("Colour by");
  // The choices wrap onto further lines under the first rather than run off the view's edge.
  const ImGuiStyle& style = ImGui::GetStyle();
  const float indent = ImGui::CalcTextSize("Colour by").x + style.ItemSpacing.x;
  float line_end = x0 + indent - style.ItemSpacing.x;
  for (size_t m = 0; m < g.metrics.size(); ++m) {
    const float w = ImGui::GetFrameHeight() + style.ItemInnerSpacing.x +
                    ImGui::CalcTextSize(g.metrics[m].c_str()).x;
    if (line_end + style.ItemSpacing.x + w <= x1) {
      ImGui::SameLine();
    } else {
      ImGui::SetCursorScreenPos(ImVec2(x0 + indent, ImGui::GetCursorScreenPos().y));
    }
    if (ImGui::RadioButton(g.metrics[m].c_str(), settings_.grid_metric == int(m)))
      settings_.grid_metric = int(m);
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    line_end = b.x;
    mark("grid.metric", g.metrics[m], a.x, a.y, b.x, b.y);
  }
  // Comparisons with dense: of the variant the user picks.
  const bool vs = metric < g.vs_dense.size() && g.vs_dense[metric] && !g.variants.empty();
  if (!g.variants.empty()) {
    ImGui::TextUnformatted("Variant");
    ImGui::SameLine();
    std::vector<const char*> names;
    float widest = 0;
    for (const std::string& v : g.variants) {
      names.push_back(v.c_str());
      widest = std::max(widest, ImGui::CalcTextSize(v.c_str()).x);
    }
    ImGui::SetNextItemWidth(widest + ImGui::GetFrameHeight() * 2);
    ImGui::Combo("##gridvariant", &settings_.grid_variant, names.data(), int(names.size()));
    if (!vs) {
      ImGui::SameLine();
      ImGui::TextDisabled("(for output error and recall)");
    }
  }
  const bool unit_ok = metric < g.unit.size() && g.unit[metric];
  if (unit_ok) {
    ImGui::SameLine(0, 20);
    ImGui::Checkbox("fixed 0-1 scale", &settings_.grid_unit_scale);
  }
  const std::vector<float>& v =
      vs ? g.variant_values[size_t(settings_.grid_variant)][metric] : g.values[metric];
  grid_range_ = value_range(v, unit_ok && settings_.grid_unit_scale);
  const ValueRange& range = grid_range_;
  const float line = ImGui::GetTextLineHeight();
  const float top = ImGui::GetCursorScreenPos().y + line * 1.5f, left = x0 + 70;
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
      const float t = std::isfinite(x) ? float(range.position(x)) : 0;
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
        const size_t gm = size_t(settings_.grid_metric);
        ImGui::SetTooltip("layer %d, head %d\n%s = %s\n%s\nclick to open this head", l, h,
                          g.metrics[gm].c_str(), fmt_num(x).c_str(),
                          gm < g.definitions.size() ? g.definitions[gm].c_str() : "");
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
  // Scale: the real range (as many digits as it takes to tell its ends apart), or one colour
  // with a note when the values differ by float noise alone.
  const float bx = left + float(g.heads) * cell + 24, by0 = top,
              by1 = top + std::min(cell * float(g.layers), 300.f);
  for (int i = 0; i < 64; ++i) {
    const float t = range.flat ? 0.5f : 1 - (float(i) + 0.5f) / 64;
    dl->AddRectFilled(ImVec2(bx, by0 + (by1 - by0) * float(i) / 64),
                      ImVec2(bx + 16, by0 + (by1 - by0) * float(i + 1) / 64 + 0.5f),
                      colormap_u32(settings_.colormap, t));
  }
  const float room = x1 - (bx + 20);
  note_fit(range.hi_label, room);
  note_fit(range.lo_label, room);
  dl->AddText(ImVec2(bx + 20, by0 - line / 2), text_color(), range.hi_label.c_str());
  dl->AddText(ImVec2(bx + 20, by1 - line / 2), text_color(), range.lo_label.c_str());
  float ny = top + cell * float(g.layers) + line * 0.5f;
  if (!range.note.empty()) {
    const std::string what = g.metrics[metric] +
                             (vs ? " of " + g.variants[size_t(settings_.grid_variant)] : "") +
                             ": " + range.lo_label + " to " + range.hi_label + ", " + range.note;
    for (const std::string& l : wrap_parts(what, x1 - x0, " ")) {
      note_fit(l, x1 - x0);
      dl->AddText(ImVec2(x0, ny), IM_COL32(230, 150, 40, 255), l.c_str());
      ny += line;
    }
  }
}

}  // namespace attn::render
