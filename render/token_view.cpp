// Token view (BertViz-style): for the selected query, lines to the keys it attends to, their
// width and opacity following the probability, one column pair per variant.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "render/canvas.h"
#include "render/draw_util.h"

namespace attn::render {

void Canvas::build_tokens(float x0, float y0, float x1, float y1) {
  const HeatmapDoc& h = doc_->heat;
  const int n = h.n_q;
  const int np = int(h.panels.size());
  if (n == 0 || np == 0) return;
  if (settings_.query < 0 || settings_.query >= n) settings_.query = n - 1;
  const float line = ImGui::GetTextLineHeight() + 3;
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  ImGui::PushTextWrapPos(x1);
  ImGui::Text("Query %d  %s   (click a query token on the left; wheel scrolls; layer %d, head %d)",
              settings_.query,
              settings_.query < int(h.q_labels.size())
                  ? clip_label(h.q_labels[size_t(settings_.query)], 20).c_str()
                  : "",
              h.layer, h.head);
  ImGui::PopTextWrapPos();
  const float top = ImGui::GetCursorScreenPos().y + line;
  const int rows = std::max(4, int((y1 - top) / line) - 1);
  static int scroll = -1;  // first shown token; follows the selection until scrolled
  if (scroll < 0 || settings_.query < scroll + 1 || settings_.query >= scroll + rows)
    scroll = settings_.query - rows * 3 / 4;
  if (io.MouseWheel != 0 && io.MousePos.y > top) scroll -= int(io.MouseWheel * 3);
  scroll = std::clamp(scroll, 0, std::max(0, n - rows + 1));
  // Row 0 pins token 0 (often the sink) when it is scrolled away.
  std::vector<int> shown;
  if (scroll > 0) shown.push_back(0);
  for (int i = scroll; i < n && int(shown.size()) < rows; ++i) shown.push_back(i);

  if (row_gen_ != doc_->generation || row_q_ != settings_.query) {
    row_cache_.assign(size_t(np), {});
    if (callbacks_.row)
      for (int p = 0; p < np; ++p) row_cache_[size_t(p)] = callbacks_.row(p, settings_.query);
    row_gen_ = doc_->generation;
    row_q_ = settings_.query;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float colw = (x1 - x0) / float(np);
  const float label_w = std::min(colw * 0.3f, ImGui::CalcTextSize("mmmmmmmmmm").x);
  for (int p = 0; p < np; ++p) {
    const float cx = x0 + float(p) * colw;
    const float lx1 = cx + label_w, rx0 = cx + colw - label_w - 12;
    // Column titles are elided to their column (whole on hover): never over the next one.
    const std::string& full = h.panels[size_t(p)].title;
    const std::string title = fit_label(full, colw - 12);
    dl->AddText(ImVec2(cx, top - line), text_color(), title.c_str());
    mark("tokens.title", title, cx, top - line, cx + ImGui::CalcTextSize(title.c_str()).x,
         top - line + ImGui::GetTextLineHeight());
    if (title != full && ImGui::IsMouseHoveringRect(ImVec2(cx, top - line), ImVec2(cx + colw, top)))
      ImGui::SetTooltip("%s", full.c_str());
    const std::vector<float>& row = row_cache_[size_t(p)];
    float mx = 1e-9f;
    for (float v : row) mx = std::max(mx, v);
    float outside = 0;
    std::vector<char> vis(size_t(n), 0);
    for (int i : shown) vis[size_t(i)] = 1;
    for (int j = 0; j < int(row.size()); ++j)
      if (!vis[size_t(j)]) outside += row[size_t(j)];
    for (size_t r = 0; r < shown.size(); ++r) {
      const int i = shown[r];
      const float y = top + float(r) * line + (scroll > 0 && r > 0 ? 6 : 0);
      if (scroll > 0 && r == 1)
        dl->AddLine(ImVec2(cx, y - 3), ImVec2(cx + colw - 12, y - 3), IM_COL32(128, 128, 128, 120));
      const std::string s = fit_label(
          i < int(h.q_labels.size()) ? clip_label(h.q_labels[size_t(i)], 12) : std::to_string(i),
          label_w);
      const ImVec2 sz = ImGui::CalcTextSize(s.c_str());
      const bool sel = i == settings_.query, hl = highlighted(i);
      if (sel)
        dl->AddRectFilled(ImVec2(lx1 - sz.x - 4, y), ImVec2(lx1 + 2, y + line - 2),
                          IM_COL32(255, 150, 30, 90));
      dl->AddText(ImVec2(lx1 - sz.x, y),
                  sel  ? IM_COL32(255, 170, 40, 255)
                  : hl ? kHighlightColor
                       : text_color(),
                  s.c_str());
      mark("tokens.label", s, lx1 - sz.x, y, lx1, y + sz.y);
      if (hl) {  // the lesson step's token: boxed in magenta on both sides
        dl->AddRect(ImVec2(lx1 - sz.x - 5, y - 1), ImVec2(lx1 + 3, y + line - 1), kHighlightColor,
                    0, 0, 2);
        dl->AddRect(ImVec2(rx0 - 1, y - 1), ImVec2(rx0 + sz.x + 5, y + line - 1), kHighlightColor,
                    0, 0, 2);
        mark("tokens.highlight", s, lx1 - sz.x - 5, y - 1, lx1 + 3, y + line - 1);
      }
      const float pv = i < int(row.size()) ? row[size_t(i)] : 0;
      if (pv > 0)
        dl->AddRectFilled(ImVec2(rx0, y),
                          ImVec2(rx0 + label_w * std::min(1.f, pv / mx), y + line - 2),
                          IM_COL32(90, 150, 255, 80));
      dl->AddText(ImVec2(rx0 + 2, y), text_color(), s.c_str());
      const ImVec2 mp = io.MousePos;
      if (mp.x >= cx && mp.x < lx1 + 2 && mp.y >= y && mp.y < y + line && ImGui::IsMouseClicked(0))
        settings_.query = i;
    }
    // Lines from the selected query to each shown key.
    int sel_row = -1;
    for (size_t r = 0; r < shown.size(); ++r)
      if (shown[r] == settings_.query) sel_row = int(r);
    if (sel_row >= 0) {
      const float ys =
          top + float(sel_row) * line + (scroll > 0 && sel_row > 0 ? 6 : 0) + line / 2 - 1;
      for (size_t r = 0; r < shown.size(); ++r) {
        const int j = shown[r];
        const float pv = j < int(row.size()) ? row[size_t(j)] : 0;
        if (pv < mx * 0.01f) continue;
        const float a = std::clamp(pv / mx, 0.f, 1.f);
        const float yk = top + float(r) * line + (scroll > 0 && r > 0 ? 6 : 0) + line / 2 - 1;
        dl->AddBezierCubic(ImVec2(lx1 + 4, ys), ImVec2((lx1 + rx0) / 2, ys),
                           ImVec2((lx1 + rx0) / 2, yk), ImVec2(rx0 - 2, yk),
                           IM_COL32(90, 150, 255, int(40 + 215 * a)), 1 + 4 * a);
      }
    }
    const std::string o = "off-screen keys: " + fmt_num(outside);
    note_fit(o, colw - 12);
    dl->AddText(ImVec2(cx, y1 - line), dim_text_color(), o.c_str());
  }
}

}  // namespace attn::render
