// Sinks: attention mass each token position receives, per layer (mean over heads and queries),
// with the residual-stream norm beneath; sink tokens and massive activations are marked. Token
// labels hang right under the bars (rotated when the bars are narrow, every n-th when even that
// does not fit); the hover box stands beside the cursor, above the labels, inside the view.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "render/canvas.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::render {

// Where the sinks view puts things this frame: what its parts draw against.
struct SinksLayout {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // the view
  float left = 0, right = 0, px = 0;     // the bars' span and one position's width
  float line = 0, band = 0;              // text line height, one layer's strip height
  std::vector<std::string> labels;       // [n] token labels
  bool horizontal = true;                // labels horizontal, else rotated
  int stride = 1;                        // every stride-th label shown
  float labels_h = 0;                    // height of the label row
  int hover = -1;                        // hovered position
  ImDrawList* dl = nullptr;
  float cx(int i) const { return left + (float(i) + 0.5f) * px; }  // centre of position i
};

void Canvas::build_sinks(float x0, float y0, float x1, float y1) {
  const SinksDoc& s = doc_->sinks;
  if (s.layers == 0 || s.n == 0) {
    ImGui::SetCursorScreenPos(ImVec2(x0, y0));
    ImGui::TextDisabled("Measuring received attention...");
    return;
  }
  SinksLayout g;
  g.x0 = x0, g.y0 = y0, g.x1 = x1, g.y1 = y1;
  g.dl = ImGui::GetWindowDrawList();
  const float line = g.line = ImGui::GetTextLineHeight();
  g.left = x0 + 70, g.right = x1 - 10;
  const float px = g.px = (g.right - g.left) / float(s.n);
  if (!(px > 0)) return;
  const bool dark = settings_.dark;

  // Token labels: horizontal when the widest fits a bar, else rotated, every `stride`-th one when
  // a line of text is wider than a bar.
  g.labels.resize(size_t(s.n));
  float widest = 0;
  for (int i = 0; i < s.n; ++i) {
    g.labels[size_t(i)] = i < int(s.labels.size()) ? clip_label(s.labels[size_t(i)], 8) : "";
    widest = std::max(widest, ImGui::CalcTextSize(g.labels[size_t(i)].c_str()).x);
  }
  g.horizontal = px >= widest + 4;
  auto thinned = [&] {  // 1, 2, 5, 10, 20, ...: the first that gives each rotated label a line
    for (int p = 1;; p *= 10)
      for (int k : {1, 2, 5})
        if (float(k * p) * px >= line * 1.1f) return k * p;
  };
  g.stride = g.horizontal ? 1 : thinned();
  g.labels_h = g.horizontal ? line : widest + 2;

  g.band = std::max(8.f, std::min(60.f, (y1 - y0 - line * 7 - g.labels_h) / float(2 * s.layers)));
  const ImVec2 m = ImGui::GetIO().MousePos;
  if (m.x >= g.left && m.x < g.right && m.y >= y0 && m.y < y1)
    g.hover = std::clamp(int((m.x - g.left) / px), 0, s.n - 1);

  const float top1 = y0 + line * 2 + 6;
  draw_sinks_strip(g, s.received, top1,
                   "Received attention mass per position (mean over heads and queries), per layer",
                   settings_.log_scale);
  float bars_bottom = top1 + g.band * float(s.layers);
  const float top2 = bars_bottom + line * 2 + 10;
  if (!s.resid_norm.empty()) {
    draw_sinks_strip(g, s.resid_norm, top2,
                     "Residual-stream norm per position, per layer (massive activations)", false);
    bars_bottom = top2 + g.band * float(s.layers);
  }
  mark("sinks.bars", "", g.left, top1, g.right, bars_bottom);
  const ImU32 sink_col = dark ? IM_COL32(255, 150, 30, 255) : IM_COL32(210, 105, 0, 255);
  for (int t : s.sinks)
    if (t >= 0 && t < s.n)
      g.dl->AddTriangleFilled(ImVec2(g.cx(t) - 5, top1 - 9), ImVec2(g.cx(t) + 5, top1 - 9),
                              ImVec2(g.cx(t), top1 - 2), sink_col);
  for (int t : s.massive_tokens)
    if (t >= 0 && t < s.n)
      g.dl->AddCircleFilled(ImVec2(g.cx(t), top2 - 5), 4, IM_COL32(230, 60, 60, 255));

  // Labels right under the bars.
  const float labels_top = bars_bottom + 3;
  draw_sinks_labels(g, bars_bottom, labels_top, sink_col);
  if (g.hover >= 0) draw_sinks_hover(g, top1, bars_bottom, labels_top);
}

void Canvas::draw_sinks_strip(const SinksLayout& g, const std::vector<float>& vals, float top,
                              const char* title, bool log) {
  const SinksDoc& s = doc_->sinks;
  const float band = g.band, px = g.px, line = g.line;
  note_fit(title, g.x1 - g.x0);
  g.dl->AddText(ImVec2(g.x0, top - line - 10), text_color(), title);
  for (int l = 0; l < s.layers; ++l) {
    const float y = top + float(l) * band;
    float hi = 1e-12f;
    for (int i = 0; i < s.n; ++i) hi = std::max(hi, vals[size_t(l * s.n + i)]);
    const std::string ln = "L" + std::to_string(l);
    g.dl->AddText(ImVec2(g.x0 + 30, y + band / 2 - line / 2), dim_text_color(), ln.c_str());
    // One bar per position; bars narrower than a pixel are merged by max.
    const int step = std::max(1, int(1.0f / std::max(px, 1e-6f)));
    for (int i = 0; i < s.n; i += step) {
      float v = 0;
      for (int j = i; j < std::min(s.n, i + step); ++j) v = std::max(v, vals[size_t(l * s.n + j)]);
      float t = log ? float(std::log10(std::max(v, 1e-4f) / 1e-4f) /
                            std::log10(std::max(hi, 1e-3f) / 1e-4f))
                    : v / hi;
      t = std::clamp(t, 0.f, 1.f);
      const float xa = g.left + float(i) * px, xb = g.left + float(i + step) * px;
      g.dl->AddRectFilled(ImVec2(xa, y + band * (1 - t)),
                          ImVec2(std::max(xb - (px > 3 ? 1 : 0), xa + 1), y + band - 1),
                          colormap_u32(settings_.colormap, 0.25f + 0.75f * t));
    }
    g.dl->AddLine(ImVec2(g.left, y + band - 0.5f), ImVec2(g.right, y + band - 0.5f), frame_color());
  }
}

void Canvas::draw_sinks_labels(const SinksLayout& g, float bars_bottom, float labels_top,
                               uint32_t hover_col) {
  const SinksDoc& s = doc_->sinks;
  const float line = g.line, px = g.px;
  float lx0 = INFINITY, lx1 = -INFINITY;
  auto draw_label = [&](int i, ImU32 col) {
    const std::string& t = g.labels[size_t(i)];
    const float cx = g.cx(i);
    const ImVec2 sz = ImGui::CalcTextSize(t.c_str());
    note_fit(t, g.horizontal ? px : g.labels_h);
    mark("sinks.label", t, cx - sz.x / 2, labels_top, cx + sz.x / 2, labels_top + sz.y);
    if (g.horizontal) {
      g.dl->AddText(ImVec2(cx - sz.x / 2, labels_top), col, t.c_str());
      lx0 = std::min(lx0, cx - sz.x / 2), lx1 = std::max(lx1, cx + sz.x / 2);
    } else {
      // Rotated, reading upwards, its end at the bars.
      add_text_vertical(g.dl, ImVec2(cx - line / 2, labels_top + sz.x), col, t.c_str());
      lx0 = std::min(lx0, cx - line / 2), lx1 = std::max(lx1, cx + line / 2);
      if (g.stride > 1)
        g.dl->AddLine(ImVec2(cx, bars_bottom), ImVec2(cx, labels_top), dim_text_color());
    }
  };
  for (int i = 0; i < s.n; i += g.stride)
    if (i != g.hover) draw_label(i, text_color());
  if (g.hover >= 0) {
    // The hovered token's label always shows, highlighted (over its neighbours when thinned).
    if (g.stride > 1) {
      const float cx = g.cx(g.hover);
      float bg[4];
      clear_color(bg);
      g.dl->AddRectFilled(ImVec2(cx - line / 2 - 2, labels_top),
                          ImVec2(cx + line / 2 + 2, labels_top + g.labels_h),
                          ImGui::ColorConvertFloat4ToU32(ImVec4(bg[0], bg[1], bg[2], 1)));
    }
    draw_label(g.hover, hover_col);
  }
  if (lx1 > lx0) mark("sinks.labels", "", lx0, labels_top, lx1, labels_top + g.labels_h);
}

void Canvas::draw_sinks_hover(const SinksLayout& g, float top1, float bars_bottom,
                              float labels_top) {
  const SinksDoc& s = doc_->sinks;
  const int hover = g.hover;
  const float line = g.line, x0 = g.x0, x1 = g.x1, y0 = g.y0, y1 = g.y1;
  const ImVec2 m = ImGui::GetIO().MousePos;
  const float hx = g.cx(hover);
  g.dl->AddLine(ImVec2(hx, top1), ImVec2(hx, bars_bottom),
                ImGui::GetColorU32(ImGuiCol_Text, 0.35f));
  std::vector<std::string> lines = {
      "position " + std::to_string(hover) + "  " +
      (hover < int(s.labels.size()) ? clip_label(s.labels[size_t(hover)], 20) : std::string())};
  for (int l = 0; l < s.layers; ++l) {
    char b[64];
    std::snprintf(b, sizeof b, "layer %d: received %.4f", l, s.received[size_t(l * s.n + hover)]);
    std::string t = b;
    if (!s.resid_norm.empty()) t += "   |resid| " + fmt_num(s.resid_norm[size_t(l * s.n + hover)]);
    lines.push_back(t);
  }
  const ImVec2 pad = ImGui::GetStyle().WindowPadding;
  float w = 0;
  for (const std::string& t : lines) w = std::max(w, ImGui::CalcTextSize(t.c_str()).x);
  w += pad.x * 2;
  const float h = float(lines.size()) * line + pad.y * 2;
  // Beside the cursor (right, else left), vertically centred on it, kept above the labels and
  // inside the view.
  float bx = m.x + 16;
  if (bx + w > x1) bx = m.x - 16 - w;
  bx = std::clamp(bx, x0, std::max(x0, x1 - w));
  const float floor_y = h <= labels_top - 4 - y0 ? labels_top - 4 : y1;
  const float by = std::clamp(m.y - h / 2, y0, std::max(y0, floor_y - h));
  ImDrawList* fg = ImGui::GetForegroundDrawList();
  ImVec4 bgc = ImGui::GetStyleColorVec4(ImGuiCol_PopupBg);
  bgc.w = 1;  // opaque: the bars beside the cursor show through a translucent box
  const ImU32 popup_bg = ImGui::ColorConvertFloat4ToU32(bgc);
  fg->AddRectFilled(ImVec2(bx, by), ImVec2(bx + w, by + h), popup_bg, 4);
  fg->AddRect(ImVec2(bx, by), ImVec2(bx + w, by + h), frame_color(), 4);
  for (size_t i = 0; i < lines.size(); ++i) {
    note_fit(lines[i], w - pad.x * 2);
    fg->AddText(ImVec2(bx + pad.x, by + pad.y + float(i) * line), text_color(), lines[i].c_str());
  }
  mark("sinks.hover", lines[0], bx, by, bx + w, by + h);
}

}  // namespace attn::render
