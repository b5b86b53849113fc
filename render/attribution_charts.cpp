// The Attribution view's lower half (render/attribution_view.cpp draws the rest): the methods'
// rank agreement as the lower triangle of the Spearman matrix, each method named on the diagonal
// and every cell carrying its number (Kendall's tau-b and the top-k overlap on hover); and the
// faithfulness curves, the target's probability as the top-ranked units are removed (deletion)
// or revealed on the baseline (insertion), one line per method against the mean of random orders
// (dashed), with each curve's AOPC / insertion area in the legend and the values of a step on
// hover.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "render/attribution_style.h"
#include "render/canvas.h"
#include "render/draw_util.h"

namespace attn::render {
namespace {

std::string fixed(double v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// A dashed polyline (ImGui 1.86 has no dash pattern).
void dashed(ImDrawList* dl, const std::vector<ImVec2>& pts, ImU32 col, float thick) {
  const float on = 5, off = 4;
  float phase = 0;
  for (size_t i = 1; i < pts.size(); ++i) {
    const ImVec2 a = pts[i - 1], b = pts[i];
    const float len = std::hypot(b.x - a.x, b.y - a.y);
    float t = 0;
    while (t < len) {
      const float period = phase < on ? on - phase : on + off - phase;
      const float step = std::min(period, len - t);
      if (phase < on) {
        const float u0 = t / len, u1 = (t + step) / len;
        dl->AddLine(ImVec2(a.x + (b.x - a.x) * u0, a.y + (b.y - a.y) * u0),
                    ImVec2(a.x + (b.x - a.x) * u1, a.y + (b.y - a.y) * u1), col, thick);
      }
      t += step;
      phase = std::fmod(phase + step, on + off);
    }
  }
}

}  // namespace

float Canvas::attribution_matrix_cell(float h) {
  const AttributionDoc& d = doc_->attribution;
  const float em = ImGui::GetFontSize(), line = ImGui::GetTextLineHeight();
  const float M = float(std::max<size_t>(1, d.methods.size()));
  // Room for the title line and the caption under the triangle.
  return std::clamp((h - 3 * line - 8) / M, em * 1.2f, em * 3.2f);
}

float Canvas::attribution_matrix_width(float h) {
  const AttributionDoc& d = doc_->attribution;
  const float cell = attribution_matrix_cell(h), em = ImGui::GetFontSize();
  float w = ImGui::CalcTextSize("Rank agreement (Spearman rho)").x;
  for (size_t i = 0; i < d.methods.size(); ++i)
    w = std::max(w, float(i) * cell + 14 + ImGui::CalcTextSize(d.short_titles[i].c_str()).x + em);
  return w;
}

void Canvas::draw_attribution_matrix(float x0, float y0, float x1, float y1) {
  const AttributionDoc& d = doc_->attribution;
  const size_t M = d.methods.size();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  float bg[4];
  clear_color(bg);
  const std::string title = "Rank agreement (Spearman rho)";
  dl->AddText(ImVec2(x0, y0), text_color(), title.c_str());
  note_fit(title, x1 - x0);
  const float top = y0 + line + 6;
  // The largest cell at which every diagonal label still fits left of x1.
  float cell = attribution_matrix_cell(y1 - y0);
  for (size_t i = 1; i < M; ++i)
    cell = std::min(cell,
                    (x1 - x0 - 14 - ImGui::CalcTextSize(d.short_titles[i].c_str()).x) / float(i));
  cell = std::max(cell, 6.f);
  const ImVec2 m = ImGui::GetIO().MousePos;
  int hi = -1, hj = -1;
  for (size_t i = 0; i < M; ++i) {
    const float y = top + float(i) * cell;
    for (size_t j = 0; j < i; ++j) {
      const float x = x0 + float(j) * cell;
      const float rho = d.spearman[i * M + j];
      const AttributionFill f = attribution_fill(rho, settings_.dark, bg);
      dl->AddRectFilled(ImVec2(x, y), ImVec2(x + cell - 1, y + cell - 1), f.fill);
      // Two decimals, without the leading zero when narrow (".42"), one decimal when narrower.
      std::string num = std::isfinite(rho) ? fixed(rho, 2) : "-";
      for (int digits : {2, 2, 1}) {
        if (ImGui::CalcTextSize(num.c_str()).x + 4 <= cell - 1 || !std::isfinite(rho)) break;
        num = fixed(rho, digits);
        const size_t zero = num.find("0.");
        if (zero != std::string::npos && zero <= 1) num.erase(zero, 1);
      }
      const ImVec2 sz = ImGui::CalcTextSize(num.c_str());
      if (sz.x + 2 <= cell - 1) {
        dl->AddText(ImVec2(x + (cell - 1 - sz.x) / 2, y + (cell - 1 - sz.y) / 2), f.text,
                    num.c_str());
      }
      if (m.x >= x && m.x < x + cell && m.y >= y && m.y < y + cell) hi = int(i), hj = int(j);
    }
    // The method on the diagonal, in its curve colour.
    const float lx = x0 + float(i) * cell + 2, ly = y + (cell - 1 - line) / 2;
    dl->AddRectFilled(ImVec2(lx, ly + line * 0.25f), ImVec2(lx + 8, ly + line * 0.75f),
                      attribution_color(i));
    note_fit(d.short_titles[i], x1 - lx - 12);
    dl->AddText(ImVec2(lx + 12, ly), text_color(), d.short_titles[i].c_str());
  }
  const float bottom = top + float(M) * cell;
  mark("attribution.matrix", "", x0, top, x0 + float(M) * cell, bottom);
  const std::string cap = "over " + std::to_string(d.n_ranked) +
                          " ranked units \u00b7 hover: Kendall tau-b, top-" + std::to_string(d.k) +
                          " overlap";
  float cy = bottom + 4;
  for (const std::string& l : wrap_parts(cap, x1 - x0)) {
    if (cy + line > y1 + 1) break;
    const std::string t = fit_label(l, x1 - x0);
    dl->AddText(ImVec2(x0, cy), dim_text_color(), t.c_str());
    cy += line;
  }
  if (hi >= 0) {
    const size_t k = size_t(hi) * M + size_t(hj);
    ImGui::BeginTooltip();
    ImGui::Text("%s vs %s", d.short_titles[size_t(hi)].c_str(), d.short_titles[size_t(hj)].c_str());
    ImGui::Text("Spearman rho   %.3f", double(d.spearman[k]));
    ImGui::Text("Kendall tau-b  %.3f", double(d.kendall[k]));
    ImGui::Text("top-%d overlap  %.2f", d.k, double(d.top_k[k]));
    ImGui::TextDisabled("over the %d ranked units", d.n_ranked);
    ImGui::EndTooltip();
  }
}

void Canvas::draw_attribution_curves(float x0, float y0, float x1, float y1) {
  const AttributionDoc& d = doc_->attribution;
  const size_t C = d.curves.size();
  const int K = int(d.fractions.size());
  if (C == 0 || K < 2) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight(), em = ImGui::GetFontSize();
  float y = y0;
  const std::string title =
      "Faithfulness: p(target) as the top-ranked units are removed (deletion) or revealed on "
      "the baseline (insertion)";
  for (const std::string& l : wrap_parts(title, x1 - x0, " ")) {
    dl->AddText(ImVec2(x0, y), text_color(), l.c_str());
    y += line;
  }
  y += 4;
  // The legend: a line sample, the name, the curve's areas; at the right when the plots keep
  // room, else under them.
  std::vector<std::string> entries(C);
  float legend_w = 0;
  for (size_t c = 0; c < C; ++c) {
    const AttributionCurve& cv = d.curves[c];
    entries[c] = cv.label + "  " + fixed(cv.aopc, 3) + " / " + fixed(cv.insertion_area, 3);
    legend_w = std::max(legend_w, ImGui::CalcTextSize(entries[c].c_str()).x + 26);
  }
  const std::string legend_head = "deletion AOPC / insertion area";
  legend_w = std::max(legend_w, ImGui::CalcTextSize(legend_head.c_str()).x);
  // Beside the plots when each keeps 14 lines of width, else under them.
  const bool legend_right = x1 - x0 - legend_w - em - em * 1.2f >= 2 * em * 14;
  const float plots_x1 = legend_right ? x1 - legend_w - em : x1;
  const float legend_h = float(C + 1) * line;
  const float plots_y1 = legend_right ? y1 : y1 - legend_h - 4;
  auto curve_color = [&](size_t c) {
    return d.curves[c].random ? attribution_random_color(settings_.dark) : attribution_color(c);
  };
  // Both plots share the y range, so that their levels compare.
  float ymax = 0;
  for (const AttributionCurve& cv : d.curves)
    for (const auto* v : {&cv.deletion, &cv.insertion})
      for (float p : *v)
        if (std::isfinite(p)) ymax = std::max(ymax, p);
  const double ystep = nice_step_real(std::max(1e-6f, ymax), 4);
  const double ytop = std::max(ystep, std::ceil(ymax / ystep - 1e-9) * ystep);
  std::string widest_tick;
  for (double v = 0; v <= ytop + ystep * 1e-6; v += ystep) {
    const std::string s = fmt_tick(v, ystep);
    if (s.size() > widest_tick.size()) widest_tick = s;
  }
  const float tick_w = ImGui::CalcTextSize(widest_tick.c_str()).x + 6;
  const float gap = em * 1.2f;
  const float pw = (plots_x1 - x0 - gap) / 2;
  const ImVec2 m = ImGui::GetIO().MousePos;
  int hover_plot = -1, hover_k = -1;
  float hover_x = 0;
  for (int plot = 0; plot < 2; ++plot) {
    const float px0 = x0 + float(plot) * (pw + gap);
    const float L = px0 + tick_w, R = px0 + pw - 4, T = y + line + 2, B = plots_y1 - 2 * line - 4;
    if (R - L < 20 || B - T < 20) continue;
    const char* name = plot == 0 ? "Deletion" : "Insertion";
    const char* better = plot == 0 ? "lower is better" : "higher is better";
    dl->AddText(ImVec2(L, y), text_color(), name);
    const float nw = ImGui::CalcTextSize(name).x;
    if (ImGui::CalcTextSize(better).x <= R - L - nw - 8)
      dl->AddText(ImVec2(L + nw + 8, y), dim_text_color(), better);
    auto sx = [&](double f) { return float(L + f * (R - L)); };
    auto sy = [&](double p) { return float(B - p / ytop * (B - T)); };
    for (double v = 0; v <= ytop + ystep * 1e-6; v += ystep) {
      const float yy = sy(v);
      dl->AddLine(ImVec2(L, yy), ImVec2(R, yy), ImGui::GetColorU32(ImGuiCol_Border, 0.35f));
      const std::string s = fmt_tick(v, ystep);
      const float w = ImGui::CalcTextSize(s.c_str()).x;
      dl->AddText(ImVec2(L - 4 - w, yy - line / 2), dim_text_color(), s.c_str());
    }
    // Quarters where their labels have room, else halves.
    const int parts = (R - L) >= ImGui::CalcTextSize("100%").x * 6 ? 4 : 2;
    for (int t = 0; t <= parts; ++t) {
      const float xx = sx(double(t) / parts);
      dl->AddLine(ImVec2(xx, B), ImVec2(xx, B + 3), frame_color());
      const std::string s = std::to_string(t * 100 / parts) + "%";
      const float w = ImGui::CalcTextSize(s.c_str()).x;
      dl->AddText(ImVec2(std::clamp(xx - w / 2, L, R - w), B + 3), dim_text_color(), s.c_str());
    }
    const char* xcap = plot == 0 ? "ranked units removed" : "ranked units revealed";
    const float xw = ImGui::CalcTextSize(xcap).x;
    dl->AddText(ImVec2((L + R - xw) / 2, B + 3 + line), dim_text_color(), xcap);
    dl->AddRect(ImVec2(L, T), ImVec2(R, B), frame_color());
    // Random first, under the methods.
    std::vector<size_t> order(C);
    std::iota(order.begin(), order.end(), 0);
    std::stable_partition(order.begin(), order.end(), [&](size_t c) { return d.curves[c].random; });
    dl->PushClipRect(ImVec2(L, T - 2), ImVec2(R, B + 2), true);
    for (size_t c : order) {
      const std::vector<float>& v = plot == 0 ? d.curves[c].deletion : d.curves[c].insertion;
      std::vector<ImVec2> pts;
      for (int k = 0; k < K && k < int(v.size()); ++k)
        if (std::isfinite(v[size_t(k)]))
          pts.push_back(ImVec2(sx(d.fractions[size_t(k)]), sy(v[size_t(k)])));
      if (d.curves[c].random)
        dashed(dl, pts, curve_color(c), 1.5f);
      else
        dl->AddPolyline(pts.data(), int(pts.size()), curve_color(c), 0, 1.8f);
    }
    dl->PopClipRect();
    mark("attribution.curves", name, L, T, R, B);
    if (m.x >= L && m.x <= R && m.y >= T && m.y <= B) {
      hover_plot = plot;
      const double f = (m.x - L) / (R - L);
      hover_k = 0;
      for (int k = 1; k < K; ++k)
        if (std::fabs(d.fractions[size_t(k)] - f) < std::fabs(d.fractions[size_t(hover_k)] - f))
          hover_k = k;
      hover_x = sx(d.fractions[size_t(hover_k)]);
      dl->AddLine(ImVec2(hover_x, T), ImVec2(hover_x, B), ImGui::GetColorU32(ImGuiCol_Text, 0.4f));
    }
  }
  // The legend.
  float lx = legend_right ? plots_x1 + em : x0, ly = legend_right ? y + line + 2 : plots_y1 + 4;
  dl->AddText(ImVec2(lx, ly), dim_text_color(), legend_head.c_str());
  ly += line;
  for (size_t c = 0; c < C; ++c) {
    const float mid = ly + line / 2;
    if (d.curves[c].random)
      dashed(dl, {ImVec2(lx, mid), ImVec2(lx + 20, mid)}, curve_color(c), 1.5f);
    else
      dl->AddLine(ImVec2(lx, mid), ImVec2(lx + 20, mid), curve_color(c), 2.f);
    dl->AddText(ImVec2(lx + 26, ly), text_color(), entries[c].c_str());
    note_fit(entries[c], legend_right ? x1 - lx - 26 : x1 - x0 - 26);
    mark("attribution.legend", entries[c], lx, ly,
         lx + 26 + ImGui::CalcTextSize(entries[c].c_str()).x, ly + line);
    ly += line;
  }
  if (hover_plot >= 0) {
    std::vector<size_t> order(C);
    std::iota(order.begin(), order.end(), 0);
    auto val = [&](size_t c) {
      const std::vector<float>& v = hover_plot == 0 ? d.curves[c].deletion : d.curves[c].insertion;
      return size_t(hover_k) < v.size() ? v[size_t(hover_k)] : NAN;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return val(a) > val(b); });
    ImGui::BeginTooltip();
    ImGui::Text("%s %.0f%% of the ranked units", hover_plot == 0 ? "removed" : "revealed",
                100.0 * d.fractions[size_t(hover_k)]);
    if (ImGui::BeginTable("##attr_curve_tip", 2, ImGuiTableFlags_SizingFixedFit)) {
      for (size_t c : order) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(curve_color(c)), "%s",
                           d.curves[c].label.c_str());
        ImGui::TableNextColumn();
        ImGui::Text("p %.4f", double(val(c)));
      }
      ImGui::EndTable();
    }
    ImGui::EndTooltip();
  }
}

}  // namespace attn::render
