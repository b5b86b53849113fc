#include "render/draw_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace attn::render {

void add_text_vertical(ImDrawList* dl, ImVec2 bottom_left, ImU32 col, const char* text) {
  const int v0 = dl->VtxBuffer.Size;
  dl->PushClipRectFullScreen();
  dl->AddText(bottom_left, col, text);
  dl->PopClipRect();
  // Rotate the glyph quads just added: (dx, dy) -> (dy, -dx) about the anchor.
  for (int i = v0; i < dl->VtxBuffer.Size; ++i) {
    ImVec2& p = dl->VtxBuffer[i].pos;
    const float dx = p.x - bottom_left.x, dy = p.y - bottom_left.y;
    p = ImVec2(bottom_left.x + dy, bottom_left.y - dx);
  }
}

std::string clip_label(const std::string& text, int max_chars) {
  int chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) return text.substr(0, i) + "..";
      ++chars;
    }
  }
  return text;
}

std::string fit_label(const std::string& text, float width) {
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  // Cut at UTF-8 character starts, longest first that fits with the "..".
  for (size_t i = text.size(); i > 0; --i) {
    if ((static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) continue;
    const std::string s = text.substr(0, i - 1) + "..";
    if (ImGui::CalcTextSize(s.c_str()).x <= width) return s;
  }
  return "..";
}

std::vector<std::string> wrap_parts(const std::string& text, float width, const std::string& sep) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(sep, start), text.size());
    const std::string part = text.substr(start, end - start);
    const std::string joined = lines.empty() ? part : lines.back() + sep + part;
    if (!lines.empty() && ImGui::CalcTextSize(joined.c_str()).x <= width)
      lines.back() = joined;
    else
      lines.push_back(part);
    if (end == text.size()) break;
    start = end + sep.size();
  }
  return lines;
}

std::string fmt_num(double v) {
  char b[32];
  const double a = std::fabs(v);
  if (v == 0) return "0";
  if (a >= 1000 || a < 1e-3)
    std::snprintf(b, sizeof b, "%.2g", v);
  else if (a >= 10)
    std::snprintf(b, sizeof b, "%.0f", v);
  else
    std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

int nice_step(double span, int target_ticks) {
  const double raw = std::max(1.0, span / std::max(1, target_ticks));
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  const double step = m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10;
  return std::max(1, int(std::lround(step * p)));
}

double nice_step_real(double span, int target_ticks) {
  const double raw = std::max(span, 1e-300) / std::max(1, target_ticks);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

std::string fmt_tick(double v, double step) {
  const double a = std::fabs(step);
  if (a >= 1e5 || a < 1e-4) return fmt_num(v);
  const int decimals = std::max(0, int(std::ceil(-std::log10(a) - 1e-9)));
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", decimals, std::fabs(v) < a * 1e-6 ? 0.0 : v);
  return b;
}

ImU32 text_color() {
  return ImGui::GetColorU32(ImGuiCol_Text);
}
ImU32 dim_text_color() {
  return ImGui::GetColorU32(ImGuiCol_TextDisabled);
}
ImU32 frame_color() {
  return ImGui::GetColorU32(ImGuiCol_Border);
}

}  // namespace attn::render
