// Sinks: attention mass each token position receives, per layer (mean over heads and queries),
// with the residual-stream norm beneath; sink tokens and massive activations are marked.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "render/canvas.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::render {

void Canvas::build_sinks(float x0, float y0, float x1, float y1) {
  const SinksDoc& s = doc_->sinks;
  if (s.layers == 0 || s.n == 0) {
    ImGui::SetCursorScreenPos(ImVec2(x0, y0));
    ImGui::TextDisabled("Measuring received attention...");
    return;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  const float left = x0 + 70, right = x1 - 10;
  const float band = std::min(60.f, (y1 - y0 - line * 6) / float(2 * s.layers + 1));
  const float px = (right - left) / float(s.n);
  const ImVec2 m = ImGui::GetIO().MousePos;
  int hover = -1;
  if (m.x >= left && m.x < right && m.y >= y0 && m.y < y1)
    hover = std::clamp(int((m.x - left) / px), 0, s.n - 1);

  auto strip = [&](const std::vector<float>& vals, float top, const char* title, bool log) {
    dl->AddText(ImVec2(x0, top - line - 4), text_color(), title);
    for (int l = 0; l < s.layers; ++l) {
      const float y = top + float(l) * band;
      float hi = 1e-12f;
      for (int i = 0; i < s.n; ++i) hi = std::max(hi, vals[size_t(l * s.n + i)]);
      const std::string ln = "L" + std::to_string(l);
      dl->AddText(ImVec2(x0 + 30, y + band / 2 - line / 2), dim_text_color(), ln.c_str());
      // One bar per position; bars narrower than a pixel are merged by max.
      const int step = std::max(1, int(1.0f / std::max(px, 1e-6f)));
      for (int i = 0; i < s.n; i += step) {
        float v = 0;
        for (int j = i; j < std::min(s.n, i + step); ++j)
          v = std::max(v, vals[size_t(l * s.n + j)]);
        float t = log ? float(std::log10(std::max(v, 1e-4f) / 1e-4f) /
                              std::log10(std::max(hi, 1e-3f) / 1e-4f))
                      : v / hi;
        t = std::clamp(t, 0.f, 1.f);
        const float xa = left + float(i) * px, xb = left + float(i + step) * px;
        dl->AddRectFilled(ImVec2(xa, y + band * (1 - t)),
                          ImVec2(std::max(xb - (px > 3 ? 1 : 0), xa + 1), y + band - 1),
                          colormap_u32(settings_.colormap, 0.25f + 0.75f * t));
      }
      dl->AddLine(ImVec2(left, y + band - 0.5f), ImVec2(right, y + band - 0.5f), frame_color());
    }
  };
  const float top1 = y0 + line * 2;
  strip(s.received, top1,
        "Received attention mass per position (mean over heads and queries), per layer",
        settings_.log_scale);
  const float top2 = top1 + band * float(s.layers) + line * 2.5f;
  if (!s.resid_norm.empty())
    strip(s.resid_norm, top2, "Residual-stream norm per position, per layer (massive activations)",
          false);
  for (int t : s.sinks)
    if (t >= 0 && t < s.n)
      dl->AddTriangleFilled(ImVec2(left + (float(t) + 0.5f) * px - 5, top1 - 9),
                            ImVec2(left + (float(t) + 0.5f) * px + 5, top1 - 9),
                            ImVec2(left + (float(t) + 0.5f) * px, top1 - 2),
                            IM_COL32(255, 150, 30, 255));
  for (int t : s.massive_tokens)
    if (t >= 0 && t < s.n)
      dl->AddCircleFilled(ImVec2(left + (float(t) + 0.5f) * px, top2 - 5), 4,
                          IM_COL32(230, 60, 60, 255));
  if (hover >= 0) {
    dl->AddLine(ImVec2(left + (float(hover) + 0.5f) * px, top1),
                ImVec2(left + (float(hover) + 0.5f) * px, y1), IM_COL32(255, 255, 255, 90));
    ImGui::BeginTooltip();
    ImGui::Text(
        "position %d  %s", hover,
        hover < int(s.labels.size()) ? clip_label(s.labels[size_t(hover)], 20).c_str() : "");
    for (int l = 0; l < s.layers; ++l)
      ImGui::Text("layer %d: received %.4f%s", l, s.received[size_t(l * s.n + hover)],
                  s.resid_norm.empty()
                      ? ""
                      : ("   |resid| " + fmt_num(s.resid_norm[size_t(l * s.n + hover)])).c_str());
    ImGui::EndTooltip();
  }
  // Token labels along the bottom when they fit.
  if (px >= line * 0.95f) {
    for (int i = 0; i < s.n && i < int(s.labels.size()); ++i)
      add_text_vertical(dl, ImVec2(left + float(i) * px + (px - line) / 2, y1 - 2), text_color(),
                        clip_label(s.labels[size_t(i)], 8).c_str());
  }
}

}  // namespace attn::render
