#include "render/draw_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "render/number_format.h"

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

std::string visible_label(const std::string& in) {
  bool plain = true;
  for (char ch : in) plain = plain && static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f;
  if (plain) return in;
  // With no frame (no font yet) the ASCII spellings.
  const ImFont* font = ImGui::GetCurrentContext() ? ImGui::GetFont() : nullptr;
  auto has = [&](ImWchar c) { return font && font->FindGlyphNoFallback(c) != nullptr; };
  const std::string newline = has(0x21b5) ? "\u21b5" : "\\n", tab = has(0x2192) ? "\u2192" : "\\t",
                    other = has(0x00b7) ? "\u00b7" : ".";
  std::string out;
  for (char ch : in) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (ch == '\n')
      out += newline;
    else if (ch == '\t')
      out += tab;
    else if (ch == '\r')
      out += "\\r";
    else if (u < 0x20 || u == 0x7f)
      out += other;
    else
      out += ch;
  }
  return out;
}

std::string clip_label(const std::string& raw, int max_chars) {
  const std::string text = visible_label(raw);
  int chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) return text.substr(0, i) + "..";
      ++chars;
    }
  }
  return text;
}

std::string fit_label(const std::string& raw, float width) {
  const std::string text = visible_label(raw);
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

std::string with_widest_numbers(const std::string& text) {
  const auto digit = [&](size_t i) { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
  std::string out;
  bool word = false;  // inside a word: its digits ("L2", "h2o") are not numbers
  for (size_t i = 0; i < text.size();) {
    if (!digit(i) || word) {
      word = std::isalpha(static_cast<unsigned char>(text[i])) || (word && digit(i));
      out += text[i++];
      continue;
    }
    while (digit(i) || (i < text.size() && text[i] == '.')) ++i;
    if (i + 2 < text.size() && (text[i] == 'e' || text[i] == 'E') &&
        (text[i + 1] == '+' || text[i + 1] == '-') && digit(i + 2))
      for (i += 2; digit(i);) ++i;
    out += "0.000000";
  }
  return out;
}

std::string fmt_num(double v) {
  // Below 1e-9 is rounding noise (a dense error of 3.1e-13): 0, and never a negative zero.
  const double a = std::fabs(v);
  if (a < 1e-9) return "0";
  if (a >= 1000 || a < 1e-3) return format_number(v, 2);
  if (a >= 10) return format_fixed(v, 0);
  return format_number(v, 3);
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
