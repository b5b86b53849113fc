// Q/K map view: one head's queries and keys over the current input in one 2-D map (AttentionViz's
// joint embedding; the document comes from app/core/analysis/qk_doc.h). Queries are filled
// circles, keys triangles, both coloured by their position in the input (viridis, with a colour
// bar); a query lies near the keys it attends to. Hover a point: its token, kind and position.
// Click a query: its row of the head's attention pattern drawn as lines to the keys it attends to
// (opacity and width by weight), and its top keys listed beside the map with their weights.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "render/canvas.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::render {
namespace {

constexpr int kTopKeys = 10;         // keys listed for the picked query
constexpr float kMinWeight = 2e-3f;  // lighter keys get no line

ImU32 with_alpha(ImU32 c, int alpha) {
  return (c & ~IM_COL32_A_MASK) | (ImU32(std::clamp(alpha, 0, 255)) << IM_COL32_A_SHIFT);
}

ImU32 position_color(int position, int n, int alpha = 255) {
  const double t = n > 1 ? double(position) / double(n - 1) : 0.5;
  return colormap_u32(Colormap::Viridis, t, alpha);
}

std::string weight_text(float w) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", double(w));
  return b;
}

// "'keeper' · query · position 12".
std::string point_text(const QkDoc& d, const QkDocPoint& p) {
  const std::string label =
      p.position >= 0 && p.position < d.n() ? d.labels[size_t(p.position)] : std::string("?");
  return "'" + label + "' \u00b7 " + (p.key ? "key" : "query") + " \u00b7 position " +
         std::to_string(p.position);
}

void draw_triangle(ImDrawList* dl, ImVec2 c, float r, ImU32 fill, ImU32 edge) {
  const ImVec2 a(c.x, c.y - r * 1.2f), b(c.x - r * 1.1f, c.y + r * 0.75f),
      e(c.x + r * 1.1f, c.y + r * 0.75f);
  dl->AddTriangleFilled(a, b, e, fill);
  if (edge) dl->AddTriangle(a, b, e, edge, 1.f);
}

// The map's square: equal units on both axes (distances are what the map means).
struct QkFrame {
  float px0 = 0, py0 = 0, side = 0;
  double cx = 0, cy = 0, span = 1;
  ImVec2 at(const QkDocPoint& p) const {
    return ImVec2(px0 + side * float(0.5 + (p.x - cx) / span),
                  py0 + side * float(0.5 - (p.y - cy) / span));
  }
};

QkFrame frame_of(const QkDoc& d, float px0, float py0, float side) {
  QkFrame f{px0, py0, side};
  if (d.points.empty()) return f;
  float xl = d.points[0].x, xh = xl, yl = d.points[0].y, yh = yl;
  for (const QkDocPoint& p : d.points) {
    xl = std::min(xl, p.x);
    xh = std::max(xh, p.x);
    yl = std::min(yl, p.y);
    yh = std::max(yh, p.y);
  }
  f.cx = 0.5 * (double(xl) + xh);
  f.cy = 0.5 * (double(yl) + yh);
  const double span = std::max(double(xh) - xl, double(yh) - yl);
  f.span = span > 0 ? span * 1.08 : 1.0;
  return f;
}

}  // namespace

void Canvas::build_qk(float x0, float y0, float x1, float y1) {
  const QkDoc& d = doc_->qk;
  qk_hover_ = -1;
  if (d.serial != qk_serial_) {
    qk_serial_ = d.serial;
    qk_query_ = -1;
  }
  if (!d.present || d.points.empty()) {
    const char* msg = "No Q/K map yet: choose a method in the Q/K map dock and press Compute.";
    const ImVec2 sz = ImGui::CalcTextSize(msg);
    const float tx = (x0 + x1 - sz.x) / 2, ty = (y0 + y1 - sz.y) / 2;
    ImGui::GetWindowDrawList()->AddText(ImVec2(tx, ty), dim_text_color(), msg);
    mark("qk.empty", msg, tx, ty, tx + sz.x, ty + sz.y);
    return;
  }
  if (qk_query_ >= d.n()) qk_query_ = -1;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float em = ImGui::GetFontSize();
  const float top = draw_qk_header(x0, y0, x1) + em * 0.5f;
  // The square map at the left, the colour bar beside it, the picked query's keys at the right.
  const float bar_w = em * 4.5f;
  const float list_w = std::clamp((x1 - x0) * 0.26f, em * 14, em * 22);
  const float side = std::max(em * 6, std::min(y1 - top, x1 - x0 - bar_w - list_w - em * 2));
  const float px0 = x0, py0 = top, px1 = px0 + side, py1 = py0 + side;
  const QkFrame f = frame_of(d, px0, py0, side);
  dl->AddRect(ImVec2(px0, py0), ImVec2(px1, py1), frame_color());
  mark("qk.plot", d.method, px0, py0, px1, py1);
  dl->PushClipRect(ImVec2(px0 + 1, py0 + 1), ImVec2(px1 - 1, py1 - 1), true);

  const int n = d.n();
  const float r = std::clamp(side / std::sqrt(float(d.points.size()) + 1.f) * 0.16f, 2.5f, 5.5f);
  // A thin edge in the theme's text tone: the dark end of viridis stays visible on a dark
  // background.
  const ImU32 edge = settings_.dark ? IM_COL32(235, 235, 235, 120) : IM_COL32(255, 255, 255, 220);
  // The picked query's attention row: faint lines first, so that the strongest lie on top.
  const bool picked = qk_query_ >= 0 && d.pattern.size() >= size_t(n) * size_t(n);
  std::vector<int> key_point(size_t(n), -1), query_point(size_t(n), -1);
  for (size_t i = 0; i < d.points.size(); ++i) {
    const QkDocPoint& p = d.points[i];
    if (p.position < 0 || p.position >= n) continue;
    (p.key ? key_point : query_point)[size_t(p.position)] = int(i);
  }
  std::vector<int> order;
  float wmax = 0;
  if (picked) {
    const float* row = d.pattern.data() + size_t(qk_query_) * size_t(n);
    for (int k = 0; k < n; ++k)
      if (row[k] >= kMinWeight && key_point[size_t(k)] >= 0) {
        order.push_back(k);
        wmax = std::max(wmax, row[k]);
      }
    std::sort(order.begin(), order.end(), [&](int a, int b) { return row[a] < row[b]; });
  }
  // Keys, then queries over them; the picked query's keys get a ring.
  for (const QkDocPoint& p : d.points)
    if (p.key)
      draw_triangle(dl, f.at(p), r, position_color(p.position, n, picked ? 120 : 235), edge);
  for (const QkDocPoint& p : d.points)
    if (!p.key) {
      const ImVec2 c = f.at(p);
      dl->AddCircleFilled(c, r, position_color(p.position, n, picked ? 120 : 235));
      dl->AddCircle(c, r, edge, 0, 1.f);
    }
  if (picked && !order.empty()) {
    const float* row = d.pattern.data() + size_t(qk_query_) * size_t(n);
    const ImVec2 q = f.at(d.points[size_t(query_point[size_t(qk_query_)])]);
    const ImU32 ink = settings_.dark ? IM_COL32(255, 255, 255, 255) : IM_COL32(20, 20, 20, 255);
    float lx0 = q.x, ly0 = q.y, lx1 = q.x, ly1 = q.y;
    for (int k : order) {
      const float t = row[k] / wmax;
      const ImVec2 c = f.at(d.points[size_t(key_point[size_t(k)])]);
      dl->AddLine(q, c, with_alpha(ink, int(30 + 225 * t)), 0.8f + 2.2f * t);
      lx0 = std::min(lx0, c.x);
      ly0 = std::min(ly0, c.y);
      lx1 = std::max(lx1, c.x);
      ly1 = std::max(ly1, c.y);
    }
    // The keys it attends to, drawn again at full colour over the faded map.
    for (int k : order) {
      const QkDocPoint& p = d.points[size_t(key_point[size_t(k)])];
      draw_triangle(dl, f.at(p), r * 1.15f, position_color(p.position, n), ink);
    }
    dl->AddCircleFilled(q, r * 1.5f, position_color(qk_query_, n));
    dl->AddCircle(q, r * 1.5f + 2, IM_COL32(255, 150, 30, 255), 0, 2.5f);
    mark("qk.row", std::to_string(order.size()), lx0, ly0, lx1, ly1);
  }
  dl->PopClipRect();
  for (const QkDocPoint& p : d.points)
    if (!p.key) {
      const ImVec2 c = f.at(p);
      mark("qk.query", std::to_string(p.position), c.x - r, c.y - r, c.x + r, c.y + r);
    }

  // Hover: the nearest point within a few pixels; a click picks a query (or clears on the empty
  // map).
  const ImVec2 mp = ImGui::GetIO().MousePos;
  const bool inside = mp.x >= px0 && mp.x < px1 && mp.y >= py0 && mp.y < py1;
  if (inside) {
    float best = (r + 4) * (r + 4);
    for (size_t i = 0; i < d.points.size(); ++i) {
      const ImVec2 c = f.at(d.points[i]);
      const float dd = (c.x - mp.x) * (c.x - mp.x) + (c.y - mp.y) * (c.y - mp.y);
      // Queries win ties: they are the points one clicks.
      if (dd < best || (dd == best && !d.points[i].key)) {
        best = dd;
        qk_hover_ = int(i);
      }
    }
    if (ImGui::IsMouseClicked(0)) {
      if (qk_hover_ >= 0 && !d.points[size_t(qk_hover_)].key)
        qk_query_ = d.points[size_t(qk_hover_)].position;
      else if (qk_hover_ < 0)
        qk_query_ = -1;
      redraw_frames_ = 2;
    }
  }
  draw_qk_colorbar(px1 + em, py0, px1 + em + bar_w, py1);
  draw_qk_top_keys(px1 + em * 2 + bar_w, py0, x1, py1);

  if (qk_hover_ >= 0) {
    const QkDocPoint& p = d.points[size_t(qk_hover_)];
    std::string text = point_text(d, p);
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(text.c_str());
    if (p.key && picked) {
      const float w = d.pattern[size_t(qk_query_) * size_t(n) + size_t(p.position)];
      const std::string line = "attention from query " + std::to_string(qk_query_) + ": " +
                               (p.position > qk_query_ && w == 0 ? "not visible" : weight_text(w));
      ImGui::TextUnformatted(line.c_str());
      text += " | " + line;
    } else if (!p.key) {
      ImGui::TextDisabled("click to see what it attends to");
    }
    ImGui::EndTooltip();
    const ImVec2 c = f.at(p);
    dl->AddCircle(c, r + 4, text_color(), 0, 1.5f);
    mark("qk.hover", text, c.x - r, c.y - r, c.x + r, c.y + r);
  }
}

float Canvas::draw_qk_header(float x0, float y0, float x1) {
  const QkDoc& d = doc_->qk;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  float y = y0;
  const std::vector<std::string> lines = wrap_parts(d.title, x1 - x0);
  for (const std::string& l : lines) {
    dl->AddText(ImVec2(x0, y), text_color(), l.c_str());
    note_fit(l, x1 - x0);
    y += line;
  }
  mark("qk.title", d.title, x0, y0, x1, y);
  if (!d.note.empty()) {
    for (const std::string& l : wrap_parts(d.note, x1 - x0, " ")) {
      dl->AddText(ImVec2(x0, y), IM_COL32(255, 170, 40, 255), l.c_str());
      y += line;
    }
    mark("qk.note", d.note, x0, y - line, x1, y);
  }
  // The legend: a circle for queries, a triangle for keys, and how to read the map.
  const float r = em * 0.3f, cy = y + line * 0.5f;
  const ImU32 mid = colormap_u32(Colormap::Viridis, 0.5);
  float x = x0 + r;
  dl->AddCircleFilled(ImVec2(x, cy), r, mid);
  x += r + 4;
  dl->AddText(ImVec2(x, y), dim_text_color(), "queries");
  x += ImGui::CalcTextSize("queries").x + em;
  draw_triangle(dl, ImVec2(x + r, cy + r * 0.2f), r, mid, 0);
  x += 2 * r + 4;
  dl->AddText(ImVec2(x, y), dim_text_color(), "keys");
  x += ImGui::CalcTextSize("keys").x + em;
  const char* hint =
      "colour: position in the input \u00b7 near = high score \u00b7 click a query for its "
      "attention row";
  const std::string h = fit_label(hint, x1 - x);
  dl->AddText(ImVec2(x, y), dim_text_color(), h.c_str());
  return y + line;
}

void Canvas::draw_qk_colorbar(float x0, float y0, float x1, float y1) {
  const QkDoc& d = doc_->qk;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  const char* cap = "position";
  dl->AddText(ImVec2(x0, y0), dim_text_color(), cap);
  const float bx0 = x0, bx1 = x0 + em * 0.9f;
  const float by0 = y0 + line + 4, by1 = std::max(by0 + em * 3, std::min(y1, by0 + em * 14));
  const int steps = 48;
  for (int i = 0; i < steps; ++i) {
    // The first position at the top, as in the text.
    const float a = by0 + (by1 - by0) * float(i) / steps;
    const float b = by0 + (by1 - by0) * float(i + 1) / steps + 0.5f;
    dl->AddRectFilled(ImVec2(bx0, a), ImVec2(bx1, b),
                      colormap_u32(Colormap::Viridis, (float(i) + 0.5f) / steps));
  }
  dl->AddRect(ImVec2(bx0, by0), ImVec2(bx1, by1), frame_color());
  const std::string first = "0", last = std::to_string(std::max(0, d.n() - 1));
  dl->AddText(ImVec2(bx1 + 4, by0), dim_text_color(), first.c_str());
  dl->AddText(ImVec2(bx1 + 4, by1 - line), dim_text_color(), last.c_str());
  note_fit(last, x1 - bx1 - 4);
  mark("qk.colorbar", cap, bx0, by0, bx1, by1);
}

void Canvas::draw_qk_top_keys(float x0, float y0, float x1, float y1) {
  const QkDoc& d = doc_->qk;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  const int n = d.n();
  if (qk_query_ < 0 || d.pattern.size() < size_t(n) * size_t(n)) {
    const char* hint = "Click a query (circle) to list the keys it attends to.";
    float y = y0;
    for (const std::string& l : wrap_parts(hint, x1 - x0, " ")) {
      dl->AddText(ImVec2(x0, y), dim_text_color(), l.c_str());
      y += line;
    }
    return;
  }
  const float* row = d.pattern.data() + size_t(qk_query_) * size_t(n);
  std::vector<int> keys(static_cast<size_t>(n));
  std::iota(keys.begin(), keys.end(), 0);
  const int shown = std::min(kTopKeys, n);
  std::partial_sort(keys.begin(), keys.begin() + shown, keys.end(),
                    [&](int a, int b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
  float y = y0;
  const std::string head = "Query " + std::to_string(qk_query_) + " '" +
                           fit_label(d.labels[size_t(qk_query_)], x1 - x0 - em * 6) +
                           "' attends to:";
  dl->AddText(ImVec2(x0, y), text_color(), head.c_str());
  mark("qk.selected", std::to_string(qk_query_), x0, y, x1, y + line);
  y += line + 4;
  const float pos_w = ImGui::CalcTextSize("00000").x, w_w = ImGui::CalcTextSize("0.000").x;
  const float label_x = x0 + pos_w + em * 0.5f;
  const float bar_x1 = x1 - w_w - em * 0.5f;
  const float wmax = std::max(1e-12f, row[keys[0]]);
  for (int i = 0; i < shown && y + line <= y1; ++i) {
    const int k = keys[size_t(i)];
    if (row[k] <= 0) break;
    // A bar of the weight under the token's text, in the key's colour.
    const float bw = (bar_x1 - label_x) * std::min(1.f, row[k] / wmax);
    dl->AddRectFilled(ImVec2(label_x, y + 1), ImVec2(label_x + bw, y + line - 1),
                      position_color(k, n, 90));
    const std::string pos = std::to_string(k);
    dl->AddText(ImVec2(label_x - em * 0.5f - ImGui::CalcTextSize(pos.c_str()).x, y),
                dim_text_color(), pos.c_str());
    const std::string label = fit_label("'" + d.labels[size_t(k)] + "'", bar_x1 - label_x - 4);
    dl->AddText(ImVec2(label_x + 3, y), text_color(), label.c_str());
    const std::string w = weight_text(row[k]);
    dl->AddText(ImVec2(x1 - ImGui::CalcTextSize(w.c_str()).x, y), text_color(), w.c_str());
    mark("qk.top", pos + " " + d.labels[size_t(k)] + " " + w, x0, y, x1, y + line);
    y += line + 2;
  }
}

}  // namespace attn::render
