// Small Dear ImGui drawing helpers shared by the views.
#pragma once
#include <imgui.h>

#include <string>
#include <vector>

namespace attn::render {

// Text rotated 90 degrees counter-clockwise, reading upwards from `bottom_left`.
void add_text_vertical(ImDrawList* dl, ImVec2 bottom_left, ImU32 col, const char* text);
// A token's text as a label: a newline shows as "↵" and a tab as "→" where the current
// font has those glyphs (else "\\n" and "\\t"), a carriage return as "\\r", other control
// characters as "·" (ImGui would draw them as "?").
std::string visible_label(const std::string& text);
// visible_label(`text`) cut to at most `max_chars` UTF-8 characters, with an ellipsis when cut.
std::string clip_label(const std::string& text, int max_chars);
// visible_label(`text`) cut (with "..") to at most `width` pixels of the current font.
std::string fit_label(const std::string& text, float width);
// The parts of `text` separated by `sep`, packed greedily into lines at most `width` pixels wide
// (a part wider than `width` gets a line of its own). Numbers are never cut this way.
std::vector<std::string> wrap_parts(const std::string& text, float width,
                                    const std::string& sep = " \u00b7 ");
// `text` with every number (123, 0.0456, 1.2e-05) replaced by one as wide as the widest such
// number prints (8 characters): the lines wrap_parts needs for it hold the text whatever its
// values become, so a layout sized by it stays put while values change.
std::string with_widest_numbers(const std::string& text);
// Compact number: 0.0123, 1.2e-05, 345.
std::string fmt_num(double v);
// A "nice" tick step near span / target_ticks (1, 2 or 5 times a power of ten, at least 1).
int nice_step(double span, int target_ticks);
// The same for real-valued axes: 1, 2 or 5 times any power of ten (0.05, 0.2, 500).
double nice_step_real(double span, int target_ticks);
// A tick value that is a multiple of `step`, with as many decimals as the step has ("0.25", "3").
std::string fmt_tick(double v, double step);
// Theme colours for text and frames drawn directly into draw lists.
ImU32 text_color();
ImU32 dim_text_color();
ImU32 frame_color();

}  // namespace attn::render
