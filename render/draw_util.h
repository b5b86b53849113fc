// Small Dear ImGui drawing helpers shared by the views.
#pragma once
#include <imgui.h>

#include <string>

namespace attn::render {

// Text rotated 90 degrees counter-clockwise, reading upwards from `bottom_left`.
void add_text_vertical(ImDrawList* dl, ImVec2 bottom_left, ImU32 col, const char* text);
// `text` cut to at most `max_chars` UTF-8 characters, with an ellipsis when cut.
std::string clip_label(const std::string& text, int max_chars);
// Compact number: 0.0123, 1.2e-05, 345.
std::string fmt_num(double v);
// A "nice" tick step near span / target_ticks (1, 2 or 5 times a power of ten, at least 1).
int nice_step(double span, int target_ticks);
// Theme colours for text and frames drawn directly into draw lists.
ImU32 text_color();
ImU32 dim_text_color();
ImU32 frame_color();

}  // namespace attn::render
