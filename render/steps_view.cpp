// Step-through view: one head's arithmetic on a short input, stage by stage (the document comes
// from app/core/teaching/steps_doc.h). Three rows of small labelled matrices, read left to right:
//   X -> Q, K, V                     (the projections of the head)
//   Q K^T -> / sqrt(d) -> masked -> softmax   (the attention weights)
//   weights x V -> out W_o           (the head's output and its contribution)
// with the real numbers printed in the cells where they fit. Hover a number: the dot product or
// sum that made it. Click a cell: entry (query i, key j) is followed through every stage (the row
// of Q and X, the row of K and V, the score, scaled, masked and softmax value, the output row),
// and the panel at the bottom right spells the path out with its numbers.
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include "render/canvas.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::render {
namespace {

const ImU32 kSelect = IM_COL32(255, 160, 30, 255);  // the followed entry's outline

const StepsMatrix* find_stage(const StepsDoc& d, const char* id) {
  for (const StepsMatrix& m : d.stages)
    if (m.id == id) return &m;
  return nullptr;
}

bool signed_stage(const StepsMatrix& m) {
  return m.id != "weights";
}

// The core's maths glyphs the UI font may lack, spelt in ASCII (K^T, sqrt d, sum_j, -).
std::string ascii_math(std::string s) {
  static const std::pair<const char*, const char*> kMap[] = {
      {"\u1d40", "^T"}, {"\u221a", "sqrt "}, {"\u03a3", "sum"}, {"\u2c7c", "_j"}, {"\u2212", "-"}};
  for (const auto& [from, to] : kMap)
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1))
      s.replace(at, std::string(from).size(), to);
  return s;
}

// The cell's number in at most `width` pixels at `size`: two decimals, one, none, or "" (none
// fits).
std::string cell_text(float v, float width, float size) {
  char b[32];
  for (const char* f : {"%.2f", "%.1f", "%.0f"}) {
    std::snprintf(b, sizeof b, f, double(v));
    std::string s = b;
    if (s == "-0.00" || s == "-0.0" || s == "-0") s = s.substr(1);
    if (ImGui::GetFont()->CalcTextSizeA(size, FLT_MAX, 0, s.c_str()).x <= width - 3) return s;
  }
  return "";
}

ImU32 ink_on(ImU32 fill) {
  const float r = float((fill >> IM_COL32_R_SHIFT) & 0xff),
              g = float((fill >> IM_COL32_G_SHIFT) & 0xff),
              b = float((fill >> IM_COL32_B_SHIFT) & 0xff);
  return 0.299f * r + 0.587f * g + 0.114f * b > 140 ? IM_COL32(20, 20, 20, 255)
                                                    : IM_COL32(245, 245, 245, 255);
}

struct Placed {
  const StepsMatrix* m = nullptr;
  float x0 = 0, y0 = 0;  // the grid's top-left
  float cw = 0, ch = 0;  // cell size
  int shown = 0;         // columns drawn (a cut matrix ends in a "..." column)
  bool cut = false;
};

std::string num_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

void Canvas::build_steps(float x0, float y0, float x1, float y1) {
  const StepsDoc& d = doc_->steps;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float em = ImGui::GetFontSize(), line = ImGui::GetTextLineHeight();
  steps_hover_stage_ = -1;
  if (d.layer != steps_layer_ || d.head != steps_head_ ||
      d.tokens.size() != size_t(std::max(steps_n_, 0))) {
    steps_layer_ = d.layer;
    steps_head_ = d.head;
    steps_n_ = int(d.tokens.size());
    steps_q_ = steps_k_ = -1;
  }
  if (!d.present || d.stages.empty()) {
    const std::string msg = !d.message.empty()
                                ? d.message
                                : std::string("No steps yet: type a short text (up to 32 tokens).");
    float y = (y0 + y1) / 2 - line;
    for (const std::string& l : wrap_parts(msg, std::min(x1 - x0, em * 40), " ")) {
      const float w = ImGui::CalcTextSize(l.c_str()).x;
      dl->AddText(ImVec2((x0 + x1 - w) / 2, y), text_color(), l.c_str());
      y += line;
    }
    mark("steps.message", msg, x0, (y0 + y1) / 2 - line, x1, y);
    return;
  }

  // Header: what is shown and how to read it.
  float y = y0;
  dl->AddText(ImVec2(x0, y), text_color(), fit_label(d.title, x1 - x0).c_str());
  mark("steps.title", d.title, x0, y, x1, y + line);
  y += line;
  const char* hint =
      "Every number is the forward pass's own. Hover a number for the arithmetic that made it; "
      "click a cell to follow query i and key j through every stage.";
  for (const std::string& l : wrap_parts(hint, x1 - x0, " ")) {
    dl->AddText(ImVec2(x0, y), dim_text_color(), l.c_str());
    y += line;
  }
  y += em * 0.4f;

  const int n = int(d.tokens.size());
  const float small = std::max(10.f, em * 0.8f);
  const float head_h = line * 2 + 2;  // title and shape lines above each grid
  const float col_h = small + 4;      // column labels
  const float arrow_w = em * 1.6f;
  // Row labels (tokens) on the left of each row of stages.
  float label_w = 0;
  for (const std::string& t : d.tokens)
    label_w = std::max(
        label_w, ImGui::GetFont()->CalcTextSizeA(small, FLT_MAX, 0, clip_label(t, 12).c_str()).x);
  label_w += 6;
  const float rows_room = (y1 - y) - 4 * (head_h + col_h) - 3 * em;
  const float ch = std::clamp(rows_room / float(4 * n), 8.f, small * 1.9f);

  const std::vector<std::vector<const char*>> rows = {
      {"x", "q", "k", "v"}, {"scores", "scaled"}, {"masked", "weights"}, {"out", "proj"}};
  std::vector<Placed> placed;
  float follow_x0 = x1, follow_y0 = y;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<const StepsMatrix*> ms;
    for (const char* id : rows[r])
      if (const StepsMatrix* m = find_stage(d, id)) ms.push_back(m);
    if (ms.empty()) continue;
    // The output row leaves room at the right for the followed entry's story.
    // Every row on the columns of the first (four stages): the two-stage rows take two columns
    // each, the output row one and a half, leaving the rest for the followed entry's story.
    const float quarter = (x1 - x0 - label_w - arrow_w * 3) / 4;
    const float share = r == 0   ? quarter
                        : r == 3 ? quarter * 1.5f + arrow_w * 0.25f
                                 : quarter * 2 + arrow_w * 0.5f;
    const float gy = y + head_h + col_h;
    // Row labels.
    for (int i = 0; i < n; ++i) {
      const std::string t = clip_label(d.tokens[size_t(i)], 12);
      const float tw = ImGui::GetFont()->CalcTextSizeA(small, FLT_MAX, 0, t.c_str()).x;
      const bool sel = i == steps_q_ || (r == 0 && i == steps_k_);
      dl->AddText(ImGui::GetFont(), small,
                  ImVec2(x0 + label_w - 6 - tw, gy + ch * float(i) + (ch - small) / 2),
                  sel ? kSelect : dim_text_color(), t.c_str());
    }
    float mx = x0 + label_w;
    for (size_t s = 0; s < ms.size(); ++s) {
      const StepsMatrix& m = *ms[s];
      Placed p;
      p.m = &m;
      p.x0 = mx;
      p.y0 = gy;
      p.ch = ch;
      // Cells at least wide enough for "-0.00" where the share allows; wide matrices are cut.
      const float want = ImGui::GetFont()->CalcTextSizeA(small, FLT_MAX, 0, "-0.00").x + 8;
      int shown = m.cols;
      if (float(m.cols) * want > share && !m.key_columns) {
        shown = std::max(2, int(share / want) - 1);
        p.cut = shown < m.cols;
      }
      p.shown = std::min(shown, m.cols);
      p.cw = share / float(p.shown + (p.cut ? 1 : 0));
      if (m.key_columns) p.cw = std::min(p.cw, share / float(n));
      placed.push_back(p);
      // Title and shape.
      const float gw = p.cw * float(p.shown + (p.cut ? 1 : 0));
      const std::string shape = "[" + std::to_string(m.rows) + " x " + std::to_string(m.cols) +
                                "]" + (m.hook.empty() ? "" : "  " + m.hook);
      const std::string title = ascii_math(m.title);
      dl->AddText(ImVec2(mx, y), text_color(), fit_label(title, share).c_str());
      dl->AddText(ImVec2(mx, y + line), dim_text_color(), fit_label(shape, share).c_str());
      note_fit(fit_label(title, share), share);
      // Column labels: key positions or dimension numbers, thinned to fit.
      for (int c = 0; c < p.shown; ++c) {
        const std::string lab = std::to_string(c);
        const float tw = ImGui::GetFont()->CalcTextSizeA(small, FLT_MAX, 0, lab.c_str()).x;
        const int every = std::max(1, int(std::ceil((tw + 4) / p.cw)));
        if (c % every != 0 && !(m.key_columns && c == steps_k_)) continue;
        const bool sel = m.key_columns && c == steps_k_;
        dl->AddText(ImGui::GetFont(), small,
                    ImVec2(mx + p.cw * (float(c) + 0.5f) - tw / 2, gy - col_h),
                    sel ? kSelect : dim_text_color(), lab.c_str());
      }
      // Colour scale: |v| max over the stage (signed stages are diverging around 0).
      float vmax = 0;
      for (size_t e = 0; e < m.values.size(); ++e)
        if (m.dropped.empty() || !m.dropped[e]) vmax = std::max(vmax, std::abs(m.values[e]));
      if (vmax <= 0) vmax = 1;
      for (int i = 0; i < m.rows; ++i)
        for (int c = 0; c < p.shown; ++c) {
          const size_t e = size_t(i) * size_t(m.cols) + size_t(c);
          const ImVec2 a(mx + p.cw * float(c), gy + ch * float(i));
          const ImVec2 b(a.x + p.cw, a.y + ch);
          const bool drop = !m.dropped.empty() && m.dropped[e];
          ImU32 fill;
          if (drop && m.dropped[e] == 1) {  // the causal rule: the future, not shown
            fill = settings_.dark ? IM_COL32(58, 60, 66, 255) : IM_COL32(236, 236, 236, 255);
          } else if (drop) {  // the variant's mask
            fill = IM_COL32(kDroppedRgb.r, kDroppedRgb.g, kDroppedRgb.b, 255);
          } else if (signed_stage(m)) {
            fill = colormap_u32(Colormap::Diverging, 0.5 + 0.5 * double(m.values[e]) / vmax);
          } else {
            fill = colormap_u32(Colormap::Blues, double(m.values[e]));
          }
          dl->AddRectFilled(a, b, fill);
          std::string t = drop ? (m.dropped[e] == 2 && p.cw > small ? "\u00d7" : "")
                               : cell_text(m.values[e], p.cw, small);
          if (!t.empty() && ch >= small) {
            const float tw = ImGui::GetFont()->CalcTextSizeA(small, FLT_MAX, 0, t.c_str()).x;
            dl->AddText(ImGui::GetFont(), small,
                        ImVec2((a.x + b.x - tw) / 2, (a.y + b.y - small) / 2), ink_on(fill),
                        t.c_str());
          }
        }
      if (p.cut) {
        const float cx = mx + p.cw * float(p.shown);
        for (int i = 0; i < m.rows; ++i)
          dl->AddText(ImGui::GetFont(), small,
                      ImVec2(cx + 3, gy + ch * float(i) + (ch - small) / 2), dim_text_color(),
                      "\u2026");
        const std::string more = "+" + std::to_string(m.cols - p.shown);
        dl->AddText(ImGui::GetFont(), small, ImVec2(cx + 1, gy - col_h), dim_text_color(),
                    more.c_str());
      }
      dl->AddRect(ImVec2(mx, gy), ImVec2(mx + gw, gy + ch * float(m.rows)), frame_color());
      mark("steps.matrix", m.id, mx, gy, mx + gw, gy + ch * float(m.rows));
      // The arrow to the next stage.
      if (s + 1 < ms.size()) {
        const float ax = mx + share + arrow_w * 0.5f, ay = gy + ch * float(n) * 0.5f;
        dl->AddLine(ImVec2(ax - arrow_w * 0.3f, ay), ImVec2(ax + arrow_w * 0.3f, ay),
                    dim_text_color(), 2.f);
        dl->AddTriangleFilled(ImVec2(ax + arrow_w * 0.35f, ay), ImVec2(ax + arrow_w * 0.1f, ay - 5),
                              ImVec2(ax + arrow_w * 0.1f, ay + 5), dim_text_color());
      }
      mx += share + arrow_w;
    }
    if (r == 3) {
      follow_x0 = mx + em;
      follow_y0 = y;
    }
    y = gy + ch * float(n) + em;
  }

  // Hover and click over the cells.
  const ImVec2 mp = ImGui::GetIO().MousePos;
  for (size_t s = 0; s < placed.size(); ++s) {
    const Placed& p = placed[s];
    const int c = int(std::floor((mp.x - p.x0) / p.cw)), i = int(std::floor((mp.y - p.y0) / p.ch));
    if (c < 0 || c >= p.shown || i < 0 || i >= p.m->rows) continue;
    steps_hover_stage_ = int(s);
    const StepsMatrix& m = *p.m;
    const size_t e = size_t(i) * size_t(m.cols) + size_t(c);
    const bool drop = !m.dropped.empty() && m.dropped[e];
    const std::string where =
        ascii_math(m.title) + "  [" + d.tokens[size_t(i)] + ", " +
        (m.key_columns ? d.tokens[size_t(c)] : "dim " + m.col_labels[size_t(c)]) + "]";
    const std::string value = drop ? "dropped" : num_text(m.values[e]);
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(where.c_str());
    ImGui::Separator();
    const std::string how = ascii_math(m.how[e]);
    ImGui::TextUnformatted(how.c_str());
    if (!m.hook.empty()) ImGui::TextDisabled("the value of hook %s", m.hook.c_str());
    ImGui::EndTooltip();
    const ImVec2 a(p.x0 + p.cw * float(c), p.y0 + p.ch * float(i));
    dl->AddRect(a, ImVec2(a.x + p.cw, a.y + p.ch), text_color(), 0, 0, 2.f);
    mark("steps.hover", m.id + " " + value + " | " + m.how[e], a.x, a.y, a.x + p.cw, a.y + p.ch);
    if (ImGui::IsMouseClicked(0)) {
      if (m.key_columns) {
        steps_q_ = i;
        steps_k_ = c;
      } else if (m.id == "k" || m.id == "v") {
        steps_k_ = i;
      } else {
        steps_q_ = i;
      }
      redraw_frames_ = 2;
    }
    break;
  }

  // The followed entry in every stage: rows of the query's stages, rows of K and V for the key,
  // the cell (and its row) in the N x N stages.
  for (const Placed& p : placed) {
    const StepsMatrix& m = *p.m;
    const float gw = p.cw * float(p.shown + (p.cut ? 1 : 0));
    const bool key_rows = m.id == "k" || m.id == "v";
    const int row = key_rows ? steps_k_ : steps_q_;
    if (row >= 0 && row < m.rows) {
      const float ry = p.y0 + p.ch * float(row);
      dl->AddRect(ImVec2(p.x0 - 1, ry - 1), ImVec2(p.x0 + gw + 1, ry + p.ch + 1), kSelect, 0, 0,
                  m.key_columns ? 1.5f : 2.5f);
    }
    if (m.key_columns && steps_q_ >= 0 && steps_k_ >= 0 && steps_q_ < m.rows &&
        steps_k_ < p.shown) {
      const ImVec2 a(p.x0 + p.cw * float(steps_k_), p.y0 + p.ch * float(steps_q_));
      dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(a.x + p.cw + 2, a.y + p.ch + 2), kSelect, 0, 0,
                  3.f);
      mark("steps.selected", m.id, a.x, a.y, a.x + p.cw, a.y + p.ch);
    }
  }
  draw_steps_follow(follow_x0, follow_y0, x1, y1);
}

void Canvas::draw_steps_follow(float x0, float y0, float x1, float y1) {
  const StepsDoc& d = doc_->steps;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  if (x1 - x0 < 80) return;
  std::vector<std::pair<std::string, ImU32>> lines;
  const int n = int(d.tokens.size()), i = steps_q_, j = steps_k_;
  if (i < 0 || j < 0 || i >= n || j >= n) {
    lines.push_back({"Follow one entry", text_color()});
    lines.push_back(
        {"Click a cell of the scores, scaled, masked or weights matrix: query i's "
         "row and key j's column are then outlined in every stage, and their "
         "arithmetic is spelt out here.",
         dim_text_color()});
  } else {
    const auto val = [&](const char* id, int r, int c) -> const StepsMatrix* {
      const StepsMatrix* m = find_stage(d, id);
      return m && r < m->rows && c < m->cols ? m : nullptr;
    };
    const auto at = [](const StepsMatrix& m, int r, int c) {
      return m.values[size_t(r) * size_t(m.cols) + size_t(c)];
    };
    lines.push_back(
        {"query " + d.tokens[size_t(i)] + "  \u2192  key " + d.tokens[size_t(j)], kSelect});
    if (const StepsMatrix* m = val("scores", i, j))
      lines.push_back({"1. Q[" + std::to_string(i) + "] \u00b7 K[" + std::to_string(j) +
                           "] = " + num_text(at(*m, i, j)),
                       text_color()});
    if (const StepsMatrix* m = val("scaled", i, j))
      lines.push_back({"2. / sqrt d = " + num_text(at(*m, i, j)), text_color()});
    if (const StepsMatrix* m = val("masked", i, j)) {
      const bool drop = !m->dropped.empty() && m->dropped[size_t(i) * size_t(m->cols) + size_t(j)];
      lines.push_back({std::string("3. mask: ") + (drop ? "dropped" : "kept"), text_color()});
    }
    if (const StepsMatrix* m = val("weights", i, j))
      lines.push_back({"4. weight = " + num_text(at(*m, i, j)), text_color()});
    if (const StepsMatrix* w = val("weights", i, j)) {
      const StepsMatrix* v = find_stage(d, "v");
      if (v && v->cols > 0)
        lines.push_back({"5. adds " + num_text(at(*w, i, j)) + " \u00d7 V[" + std::to_string(j) +
                             "] to out[" + std::to_string(i) + "] (V[" + std::to_string(j) +
                             ",0] = " + num_text(at(*v, j, 0)) + ")",
                         text_color()});
    }
    if (const StepsMatrix* m = val("out", i, 0))
      lines.push_back(
          {"6. out[" + std::to_string(i) + ",0] = " + num_text(at(*m, i, 0)) + ", then W_o",
           text_color()});
  }
  float y = y0;
  for (const auto& [text, col] : lines)
    for (const std::string& l : wrap_parts(text, x1 - x0, " ")) {
      if (y + line > y1) break;
      dl->AddText(ImVec2(x0, y), col, l.c_str());
      y += line;
    }
  mark("steps.follow", lines.empty() ? "" : lines.front().first, x0, y0, x1, y);
}

}  // namespace attn::render
