// Attribution view: what each attribution method says one target depended on (the document comes
// from app/core/analysis/attribution_doc.h). Text: one row per method, the method at the left and
// the tokens as chips wrapped like the text, coloured on a diverging scale (each method divided by
// its largest |score| over the ranked tokens; tokens the target cannot depend on greyed, the
// target marked after its position); long inputs scroll, or shrink to compact cells when the
// chips of every method do not fit. Images: small multiples, the input and each method's patch
// scores over it. Below: the methods' rank agreement and the deletion / insertion curves
// (render/attribution_charts.cpp). Hover a token or patch: its score and rank in every method.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "render/attribution_style.h"
#include "render/canvas.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::render {

// Where the token flow puts each unit: the same for every method's row, so that a token sits at
// the same place in each.
struct AttributionFlow {
  bool chips = true;                  // token chips with text, else compact cells
  std::vector<float> x, w;            // [units] left edge (from the flow's left) and width
  std::vector<int> line;              // [units] wrapped line
  float target_x = -1, target_w = 0;  // the target marker after the target's position
  int target_line = 0;
  int lines = 1;
  float cell_h = 0, pitch = 0;  // a chip's height, the distance between lines
  float height() const { return float(lines - 1) * pitch + cell_h; }
};

namespace {

constexpr float kPad = 3;  // text padding inside a chip

// What the target marker after the target's position says in chip mode ("' the'").
std::string target_text(const AttributionDoc& d) {
  return d.target_label.empty() ? "target" : d.target_label;
}

// Chips (`cell` 0: each token's text on a chip, a wider gap where a word starts, a new line after
// a newline) or compact cells `cell` pixels wide, wrapped at `width`.
AttributionFlow layout_flow(const AttributionDoc& d, float width, float cell) {
  AttributionFlow f;
  const bool chips = cell <= 0;
  f.chips = chips;
  const float line = ImGui::GetTextLineHeight();
  f.cell_h = chips ? line + 4 : std::clamp(cell * 1.6f, 5.f, line * 0.9f);
  f.pitch = f.cell_h + (chips ? 4.f : f.cell_h >= 8 ? 3.f : 1.f);
  const float cell_gap = cell >= 3 ? 1.f : 0.f;
  const int U = d.units();
  f.x.resize(size_t(U));
  f.w.resize(size_t(U));
  f.line.resize(size_t(U));
  float x = 0;
  int ln = 0;
  auto place = [&](float w, float gap) {
    if (x > 0) x += gap;
    if (x > 0 && x + w > width) {
      ++ln;
      x = 0;
    }
    const float at = x;
    x += w;
    return at;
  };
  for (int u = 0; u < U; ++u) {
    const float w = chips ? ImGui::CalcTextSize(d.labels[size_t(u)].c_str()).x + 2 * kPad : cell;
    const float gap = chips ? (d.word_start[size_t(u)] ? 5.f : 1.f) : cell_gap;
    f.x[size_t(u)] = place(w, gap);
    f.w[size_t(u)] = w;
    f.line[size_t(u)] = ln;
    if (u == d.target_unit) {
      f.target_w = chips ? ImGui::CalcTextSize(target_text(d).c_str()).x + 2 * kPad + 12 : 9;
      f.target_x = place(f.target_w, chips ? 5.f : 1.f);
      f.target_line = ln;
    }
    if (chips && d.line_break[size_t(u)] && u + 1 < U) {
      ++ln;
      x = 0;
    }
  }
  f.lines = ln + 1;
  return f;
}

}  // namespace

// The rows' plan for the text: where each token goes, each method's label and block height.
struct AttributionRows {
  AttributionFlow flow;
  std::vector<std::vector<std::string>> titles, details;  // [method] wrapped lines
  std::vector<float> block_h;                             // [method]
  float total = 0;                                        // every block
  float label_w = 0, flow_dx = 0;  // the label column, the flow's left from the view's
};

// The image small multiples' plan: the input and one panel per method.
struct AttributionGrid {
  float side = 0, title_h = 0, gap = 0;
  int cols = 1, rows = 1;
  float height() const { return float(rows) * (side + title_h + gap) - gap; }
};

AttributionRows Canvas::plan_attribution_rows(float x0, float x1, float room) {
  const AttributionDoc& d = doc_->attribution;
  const size_t M = d.methods.size();
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  AttributionRows r;
  r.label_w = std::clamp((x1 - x0) * 0.2f, em * 8, em * 14);
  r.flow_dx = r.label_w + em * 0.8f;
  const float scroll_w = ImGui::GetStyle().ScrollbarSize + 4;
  const float flow_w = std::max(em * 4, x1 - x0 - r.flow_dx - scroll_w);
  // Each method's label, its title over its details: with chips wrapped whole to the label
  // column; with cells one line of title (and of details where the block has room), the rest on
  // hover.
  r.titles.resize(M);
  r.details.resize(M);
  auto place = [&](float cell) {
    r.flow = layout_flow(d, flow_w, cell);
    r.block_h.assign(M, 0);
    r.total = 0;
    for (size_t i = 0; i < M; ++i) {
      if (r.flow.chips) {
        r.titles[i] = wrap_parts(d.titles[i], r.label_w - 12, " ");
        r.details[i] = wrap_parts(d.details[i], r.label_w - 12);
      } else {
        r.titles[i] = {fit_label(d.titles[i], r.label_w - 12)};
        r.details[i].clear();
        if (r.flow.height() >= 2 * line) r.details[i] = {fit_label(d.details[i], r.label_w - 12)};
      }
      r.block_h[i] =
          std::max(r.flow.height(), float(r.titles[i].size() + r.details[i].size()) * line) +
          em * 0.8f;
      r.total += r.block_h[i];
    }
  };
  // Chips unless compact cells are asked for, or (auto) the chips of every method would not fit
  // and the input is long (a short one scrolls its chips: cells would hide a few words' text);
  // cells as large as fit (down to 2 px, then they scroll).
  if (settings_.attribution_layout != 2) {
    place(0);
    float tallest = 0;
    for (float h : r.block_h) tallest = std::max(tallest, h);
    if (settings_.attribution_layout == 1 || r.total <= room ||
        (d.units() <= 96 && tallest <= room))
      return r;
  }
  for (float cell : {12.f, 10.f, 8.f, 7.f, 6.f, 5.f, 4.f, 3.f, 2.f}) {
    place(cell);
    if (r.total <= room) break;
  }
  return r;
}

AttributionGrid Canvas::plan_attribution_images(float x0, float x1, float room) {
  const AttributionDoc& d = doc_->attribution;
  const int n = int(d.methods.size()) + 1;  // the input, then each method
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  AttributionGrid g;
  g.gap = em;
  g.title_h = 2 * line + 4;
  // The column count that gives the largest panels in the room.
  for (int c = 1; c <= n; ++c) {
    const int rows = (n + c - 1) / c;
    const float s = std::min((x1 - x0 - g.gap * float(c - 1)) / float(c),
                             (room - (g.title_h + g.gap) * float(rows) + g.gap) / float(rows));
    if (s > g.side) g.side = s, g.cols = c, g.rows = rows;
  }
  g.side = std::clamp(g.side, 24.f, em * 20);
  return g;
}

void Canvas::build_attribution(float x0, float y0, float x1, float y1) {
  const AttributionDoc& d = doc_->attribution;
  attr_hover_method_ = attr_hover_unit_ = -1;
  if (!d.present || d.methods.empty()) {
    const char* msg = "No attribution yet: choose methods in the Attribution dock and press Run.";
    const ImVec2 sz = ImGui::CalcTextSize(msg);
    ImGui::GetWindowDrawList()->AddText(ImVec2((x0 + x1 - sz.x) / 2, (y0 + y1 - sz.y) / 2),
                                        dim_text_color(), msg);
    mark("attribution.empty", msg, (x0 + x1 - sz.x) / 2, (y0 + y1 - sz.y) / 2, (x0 + x1 + sz.x) / 2,
         (y0 + y1 + sz.y) / 2);
    return;
  }
  const float top = draw_attribution_header(x0, y0, x1);
  const bool matrix = d.methods.size() >= 2, curves = !d.curves.empty();
  const float em = ImGui::GetFontSize(), gap = em, avail = y1 - top;
  // The lower half wants about 40% of the view and needs 13 lines; the methods take the rest,
  // more when that saves them from scrolling, and what they leave goes back to the lower half.
  float want = 0, least = 0;
  if (matrix || curves) {
    want = std::min(std::clamp(avail * 0.4f, em * 13, em * 22), avail * 0.67f);
    least = std::min(want, em * 13);
  }
  const float room = avail - (want > 0 ? want + gap : 0);
  const float room_max = avail - (least > 0 ? least + gap : 0);
  float used = room;
  if (d.image) {
    const AttributionGrid g = plan_attribution_images(x0, x1, room);
    used = std::min(room, g.height());
    draw_attribution_images(g, x0, top);
  } else {
    const AttributionRows r = plan_attribution_rows(x0, x1, room_max);
    used = r.total <= room_max ? r.total : room;
    draw_attribution_rows(r, x0, top, x1, top + used);
  }
  float bottom = want;
  if (bottom > 0) {
    bottom = std::min(avail - used - gap, std::max(bottom, em * 30));
    const float by = top + used + gap, by1 = std::min(y1, by + bottom);
    ImGui::GetWindowDrawList()->AddLine(ImVec2(x0, by - gap / 2), ImVec2(x1, by - gap / 2),
                                        frame_color());
    float split = x1;
    if (matrix && curves)
      split = std::min(x0 + (x1 - x0) * 0.42f, x0 + attribution_matrix_width(by1 - by));
    if (matrix) draw_attribution_matrix(x0, by, split, by1);
    if (curves) draw_attribution_curves(matrix ? split + gap * 1.5f : x0, by, x1, by1);
  }
  if (attr_hover_unit_ >= 0) attribution_tooltip(attr_hover_method_, attr_hover_unit_);
}

float Canvas::draw_attribution_header(float x0, float y0, float x1) {
  const AttributionDoc& d = doc_->attribution;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  // The colour key at the right: the diverging scale from -1 to +1 of each method's largest
  // |score|.
  const float bar_w = em * 9, bar_h = em * 0.7f;
  const float kx1 = x1, kx0 = x1 - bar_w;
  float bg[4];
  clear_color(bg);
  const int steps = 48;
  for (int i = 0; i < steps; ++i) {
    const float v = -1 + 2 * (float(i) + 0.5f) / steps;
    dl->AddRectFilled(ImVec2(kx0 + bar_w * float(i) / steps, y0 + line + 2),
                      ImVec2(kx0 + bar_w * float(i + 1) / steps + 0.5f, y0 + line + 2 + bar_h),
                      attribution_fill(v, settings_.dark, bg).fill);
  }
  dl->AddRect(ImVec2(kx0, y0 + line + 2), ImVec2(kx1, y0 + line + 2 + bar_h), frame_color());
  const char* cap = "score / method's max |score|";
  const float cap_w = ImGui::CalcTextSize(cap).x;
  dl->AddText(ImVec2(kx1 - cap_w, y0), dim_text_color(), cap);
  auto tick = [&](float t, const char* s) {
    const float w = ImGui::CalcTextSize(s).x;
    const float x = std::clamp(kx0 + bar_w * t - w / 2, kx0, kx1 - w);
    dl->AddText(ImVec2(x, y0 + line + 4 + bar_h), dim_text_color(), s);
  };
  tick(0, "-1");
  tick(0.5f, "0");
  tick(1, "+1");
  const float key_w = std::max(bar_w, cap_w) + em;
  mark("attribution.key", cap, kx0, y0, kx1, y0 + 2 * line + 4 + bar_h);

  // The title wraps at its separators beside the key; the reading hint below it.
  float y = y0;
  const float room = x1 - x0 - key_w;
  for (const std::string& l : wrap_parts(d.title, room)) {
    note_fit(l, room);
    dl->AddText(ImVec2(x0, y), text_color(), l.c_str());
    mark("attribution.title", l, x0, y, x0 + ImGui::CalcTextSize(l.c_str()).x, y + line);
    y += line;
  }
  std::string hint;
  if (d.image)
    hint =
        "Each panel: one method's score per patch over the input (red: for the target, blue: "
        "against it). Hover a patch for its score and rank in every method.";
  else
    hint = "Each row: one method over the " + std::to_string(d.units()) + " tokens (" +
           std::to_string(d.n_ranked) + " ranked" +
           (d.n_ranked < d.units() ? "; greyed: after the target position" : "") +
           "). Hover a token for its score and rank in every method.";
  for (const std::string& l : wrap_parts(hint, room, " ")) {
    dl->AddText(ImVec2(x0, y), dim_text_color(), l.c_str());
    y += line;
  }
  if (!d.note.empty()) {
    const ImU32 warn = settings_.dark ? IM_COL32(255, 170, 60, 255) : IM_COL32(180, 90, 0, 255);
    for (const std::string& l : wrap_parts(d.note, room, " ")) {
      dl->AddText(ImVec2(x0, y), warn, l.c_str());
      mark("attribution.note", l, x0, y, x0 + ImGui::CalcTextSize(l.c_str()).x, y + line);
      y += line;
    }
  }
  return std::max(y, y0 + 2 * line + 4 + bar_h) + line * 0.6f;
}

void Canvas::draw_attribution_rows(const AttributionRows& r, float x0, float y0, float x1,
                                   float y1) {
  const AttributionDoc& d = doc_->attribution;
  const size_t M = d.methods.size();
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  const AttributionFlow& flow = r.flow;
  const std::vector<float>& block_h = r.block_h;
  const float label_w = r.label_w, total = r.total;
  const float scroll_w = ImGui::GetStyle().ScrollbarSize + 4;
  mark("attribution.rows", flow.chips ? "chips" : "cells", x0, y0, x1, y1);
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  ImGui::BeginChild("##attr_rows", ImVec2(x1 - x0, std::max(line, y1 - y0)), false,
                    ImGuiWindowFlags_NoBackground);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();  // moves with the scroll
  const float view_top = ImGui::GetWindowPos().y, view_bottom = view_top + ImGui::GetWindowHeight();
  const ImVec2 m = ImGui::GetIO().MousePos;
  const bool hovered = ImGui::IsWindowHovered();
  float bg[4];
  clear_color(bg);
  const float fx0 = origin.x + r.flow_dx;
  const ImU32 dim = dim_text_color(), frame = frame_color();
  const ImU32 accent = settings_.dark ? IM_COL32(255, 170, 40, 255) : IM_COL32(200, 100, 0, 255);

  // The hovered unit first (every row outlines it).
  float by = origin.y;
  for (size_t i = 0; i < M && hovered; ++i) {
    if (m.y >= by && m.y < by + block_h[i] && m.x >= fx0)
      for (int u = 0; u < d.units(); ++u) {
        const float cx = fx0 + flow.x[size_t(u)],
                    cy = by + float(flow.line[size_t(u)]) * flow.pitch;
        if (m.x >= cx - 1 && m.x < cx + flow.w[size_t(u)] + 1 && m.y >= cy - 2 &&
            m.y < cy + flow.cell_h + 2) {
          attr_hover_method_ = int(i);
          attr_hover_unit_ = u;
        }
      }
    by += block_h[i];
  }

  by = origin.y;
  for (size_t i = 0; i < M; ++i) {
    const float bh = block_h[i];
    if (by + bh < view_top || by > view_bottom) {  // off screen: nothing to draw
      by += bh;
      continue;
    }
    if (i > 0) dl->AddLine(ImVec2(origin.x, by - em * 0.4f), ImVec2(x1, by - em * 0.4f), frame);
    // The method at the left: a swatch in its curve colour, its title, its details; it stays in
    // sight while its block scrolls past, and says everything on hover.
    const float label_h = float(r.titles[i].size() + r.details[i].size()) * line;
    float ly = std::clamp(view_top + 2, by, std::max(by, by + bh - em * 0.8f - label_h));
    if (ImGui::IsMouseHoveringRect(ImVec2(origin.x, ly),
                                   ImVec2(origin.x + label_w, ly + label_h)) &&
        hovered)
      ImGui::SetTooltip("%s\n%s", d.titles[i].c_str(), d.details[i].c_str());
    dl->AddRectFilled(ImVec2(origin.x, ly + line * 0.3f),
                      ImVec2(origin.x + 6, ly + line * 0.3f + line * 0.5f), attribution_color(i));
    for (const std::string& t : r.titles[i]) {
      note_fit(t, label_w - 12);
      dl->AddText(ImVec2(origin.x + 10, ly), text_color(), t.c_str());
      ly += line;
    }
    for (const std::string& t : r.details[i]) {
      note_fit(t, label_w - 12);
      dl->AddText(ImVec2(origin.x + 10, ly), dim, t.c_str());
      ly += line;
    }
    mark("attribution.row", d.methods[i], origin.x, by, x1, by + bh);
    const std::vector<float>& s = d.scores[i];
    const float scale = d.scale[i] > 0 ? d.scale[i] : 1;
    for (int u = 0; u < d.units(); ++u) {
      const float cx = fx0 + flow.x[size_t(u)], cy = by + float(flow.line[size_t(u)]) * flow.pitch;
      if (cy + flow.cell_h < view_top || cy > view_bottom) continue;
      const ImVec2 a(cx, cy), b(cx + flow.w[size_t(u)], cy + flow.cell_h);
      const bool ranked = d.ranked[size_t(u)] != 0;
      const AttributionFill c = attribution_fill(
          ranked ? std::clamp(s[size_t(u)] / scale, -1.f, 1.f) : 0.f, settings_.dark, bg);
      if (ranked) {
        dl->AddRectFilled(a, b, c.fill, flow.chips ? 2.f : 0.f);
        if (flow.chips) dl->AddRect(a, b, ImGui::GetColorU32(ImGuiCol_Border, 0.45f), 2.f);
      } else {  // greyed: the target cannot depend on it
        dl->AddRectFilled(a, b, ImGui::GetColorU32(ImGuiCol_TextDisabled, 0.16f),
                          flow.chips ? 2.f : 0.f);
      }
      if (flow.chips)
        dl->AddText(ImVec2(cx + kPad, cy + 2), ranked ? c.text : dim, d.labels[size_t(u)].c_str());
      if (u == attr_hover_unit_)
        dl->AddRect(ImVec2(a.x - 1.5f, a.y - 1.5f), ImVec2(b.x + 1.5f, b.y + 1.5f), text_color(),
                    2.f, 0, 2.f);
    }
    // The target after its position: what z is the logit of.
    if (flow.target_x >= 0) {
      const float tx = fx0 + flow.target_x, ty = by + float(flow.target_line) * flow.pitch;
      const float mid = ty + flow.cell_h / 2;
      if (flow.chips) {
        dl->AddTriangleFilled(ImVec2(tx, mid - 4), ImVec2(tx + 7, mid), ImVec2(tx, mid + 4),
                              accent);
        const ImVec2 a(tx + 10, ty), b(tx + flow.target_w, ty + flow.cell_h);
        dl->AddRect(a, b, accent, 2.f, 0, 1.5f);
        dl->AddText(ImVec2(a.x + kPad, ty + 2), accent, target_text(d).c_str());
      } else {
        dl->AddTriangleFilled(ImVec2(tx, mid - 4), ImVec2(tx + 7, mid), ImVec2(tx, mid + 4),
                              accent);
      }
    }
    by += bh;
  }
  ImGui::Dummy(ImVec2(x1 - x0 - scroll_w, total));
  ImGui::EndChild();
}

void Canvas::draw_attribution_images(const AttributionGrid& g, float x0, float y0) {
  const AttributionDoc& d = doc_->attribution;
  const int M = int(d.methods.size()), n = M + 1;  // the input, then each method
  const int G = d.grid_h * d.grid_w;
  if (G <= 0) return;
  const float line = ImGui::GetTextLineHeight();
  const float side = g.side, gap = g.gap, title_h = g.title_h;
  const int cols = g.cols;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 m = ImGui::GetIO().MousePos;
  auto panel_at = [&](int p) {
    return ImVec2(x0 + float(p % cols) * (side + gap),
                  y0 + float(p / cols) * (side + title_h + gap) + title_h);
  };
  // The hovered patch, for every panel's outline.
  for (int p = 0; p < n; ++p) {
    const ImVec2 o = panel_at(p);
    if (m.x >= o.x && m.x < o.x + side && m.y >= o.y && m.y < o.y + side &&
        !ImGui::IsAnyItemHovered()) {
      const int gx = std::clamp(int((m.x - o.x) / side * float(d.grid_w)), 0, d.grid_w - 1);
      const int gy = std::clamp(int((m.y - o.y) / side * float(d.grid_h)), 0, d.grid_h - 1);
      attr_hover_unit_ = gy * d.grid_w + gx;
      attr_hover_method_ = p - 1;
    }
  }
  const float cw = side / float(d.grid_w), ch = side / float(d.grid_h);
  for (int p = 0; p < n; ++p) {
    const ImVec2 o = panel_at(p);
    const std::string full = p == 0 ? "Input" : d.titles[size_t(p - 1)];
    // The short title where the whole one does not fit ("Gradient-weighted relevance").
    const std::string& shorter = p == 0 ? full : d.short_titles[size_t(p - 1)];
    const std::string t =
        fit_label(ImGui::CalcTextSize(full.c_str()).x <= side ? full : shorter, side);
    dl->AddText(ImVec2(o.x, o.y - title_h), text_color(), t.c_str());
    if (t != full && ImGui::IsMouseHoveringRect(ImVec2(o.x, o.y - title_h),
                                                ImVec2(o.x + side, o.y - title_h + line)))
      ImGui::SetTooltip("%s", full.c_str());
    const std::string sub = fit_label(
        p == 0 ? "target " + d.target_label : "max |s| " + fmt_num(d.scale[size_t(p - 1)]), side);
    dl->AddText(ImVec2(o.x, o.y - title_h + line), dim_text_color(), sub.c_str());
    // The image in grey under the overlay (the colours are the scores'), in colour alone.
    if (!d.pixels.empty()) {
      const int step = std::max(1, std::max(d.height, d.width) / 112);
      const float px = side / float(std::max(d.height, d.width));
      for (int y = 0; y < d.height; y += step)
        for (int x = 0; x < d.width; x += step) {
          const uint8_t* q =
              &d.pixels[(size_t(y) * size_t(d.width) + size_t(x)) * size_t(d.channels)];
          int r = q[0], g = d.channels >= 3 ? q[1] : q[0], b = d.channels >= 3 ? q[2] : q[0];
          if (p > 0) {
            const int l = (r * 3 + g * 6 + b) / 10;
            r = g = b = 40 + l * 170 / 255;
          }
          dl->AddRectFilled(
              ImVec2(o.x + float(x) * px, o.y + float(y) * px),
              ImVec2(o.x + float(x + step) * px + 0.5f, o.y + float(y + step) * px + 0.5f),
              IM_COL32(r, g, b, 255));
        }
    } else {
      dl->AddRectFilled(o, ImVec2(o.x + side, o.y + side), IM_COL32(60, 60, 64, 255));
    }
    if (p > 0) {
      const std::vector<float>& s = d.scores[size_t(p - 1)];
      const float scale = d.scale[size_t(p - 1)] > 0 ? d.scale[size_t(p - 1)] : 1;
      for (int u = 0; u < G && u < int(s.size()); ++u) {
        const ImVec2 a(o.x + float(u % d.grid_w) * cw, o.y + float(u / d.grid_w) * ch);
        dl->AddRectFilled(a, ImVec2(a.x + cw, a.y + ch),
                          attribution_overlay(std::clamp(s[size_t(u)] / scale, -1.f, 1.f)));
      }
    }
    dl->AddRect(o, ImVec2(o.x + side, o.y + side), frame_color());
    if (attr_hover_unit_ >= 0) {
      const ImVec2 a(o.x + float(attr_hover_unit_ % d.grid_w) * cw,
                     o.y + float(attr_hover_unit_ / d.grid_w) * ch);
      dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(a.x + cw + 1, a.y + ch + 1),
                  IM_COL32(255, 255, 255, 255), 0, 0, 2.5f);
      dl->AddRect(a, ImVec2(a.x + cw, a.y + ch), IM_COL32(0, 0, 0, 255), 0, 0, 1.f);
    }
    mark("attribution.panel", p == 0 ? "input" : d.methods[size_t(p - 1)], o.x, o.y, o.x + side,
         o.y + side);
  }
}

void Canvas::attribution_tooltip(int method, int unit) {
  const AttributionDoc& d = doc_->attribution;
  if (unit < 0 || unit >= d.units()) return;
  mark("attribution.hover",
       d.labels[size_t(unit)] + " | " +
           (method >= 0 && size_t(method) < d.methods.size() ? d.methods[size_t(method)] : "input"),
       0, 0, 0, 0);
  float bg[4];
  clear_color(bg);
  ImGui::BeginTooltip();
  if (d.image)
    ImGui::Text("Patch %s (row, column)", d.labels[size_t(unit)].c_str());
  else
    ImGui::Text("Token %d  '%s'", d.first_token + unit,
                clip_label(d.labels[size_t(unit)], 24).c_str());
  if (!d.ranked[size_t(unit)]) {
    ImGui::TextDisabled("after the target position: the target cannot depend on it");
    ImGui::EndTooltip();
    return;
  }
  if (ImGui::BeginTable("##attr_tip", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("method");
    ImGui::TableSetupColumn("score");
    ImGui::TableSetupColumn("/ max");
    ImGui::TableSetupColumn("rank");
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < d.methods.size(); ++i) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const float v = d.scores[i][size_t(unit)];
      const float x = d.scale[i] > 0 ? v / d.scale[i] : 0;
      if (int(i) == method)
        ImGui::TextColored(ImVec4(1.f, 0.67f, 0.16f, 1), "%s", d.short_titles[i].c_str());
      else
        ImGui::TextUnformatted(d.short_titles[i].c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", double(v));
      ImGui::TableNextColumn();
      // The colour the cell has, beside its value.
      const ImVec2 a = ImGui::GetCursorScreenPos();
      const float h = ImGui::GetTextLineHeight();
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(a.x, a.y + 2), ImVec2(a.x + h, a.y + h - 2),
                                                attribution_fill(x, settings_.dark, bg).fill);
      ImGui::Dummy(ImVec2(h + 2, h));
      ImGui::SameLine();
      ImGui::Text("%+.2f", double(x));
      ImGui::TableNextColumn();
      ImGui::Text("%d / %d", d.ranks[i][size_t(unit)], d.n_ranked);
    }
    ImGui::EndTable();
  }
  ImGui::EndTooltip();
}

}  // namespace attn::render
