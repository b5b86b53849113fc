// Image view: the CLS token's attention over the image patches, per head (each image labelled with
// its head), as the mean over heads, or as the dense model's rollout across layers (one map, with
// a caption: rollout is computed for dense only); patches a variant dropped are hatched.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "render/canvas.h"
#include "render/colormap.h"
#include "render/draw_util.h"

namespace attn::render {
namespace {

// Draws the image in [x0, x0 + side)^2 with the patch attention `att` (grid) over it.
void draw_overlay(ImDrawList* dl, const ImageDoc& im, const float* att, const float* kept, float x0,
                  float y0, float side, Colormap cm) {
  const int step = std::max(1, std::max(im.height, im.width) / 96);
  const float px = side / float(std::max(im.height, im.width));
  for (int y = 0; y < im.height; y += step)
    for (int x = 0; x < im.width; x += step) {
      const uint8_t* p = &im.pixels[(size_t(y) * im.width + x) * size_t(im.channels)];
      const uint8_t r = p[0], g = im.channels >= 3 ? p[1] : p[0],
                    b = im.channels >= 3 ? p[2] : p[0];
      dl->AddRectFilled(ImVec2(x0 + float(x) * px, y0 + float(y) * px),
                        ImVec2(x0 + float(x + step) * px + 0.5f, y0 + float(y + step) * px + 0.5f),
                        IM_COL32(r, g, b, 255));
    }
  if (!att) return;
  const int n = im.grid_h * im.grid_w;
  float hi = 1e-9f;
  for (int i = 0; i < n; ++i) hi = std::max(hi, att[i]);
  const float cw = side / float(im.grid_w), ch = side / float(im.grid_h);
  for (int gy = 0; gy < im.grid_h; ++gy)
    for (int gx = 0; gx < im.grid_w; ++gx) {
      const int i = gy * im.grid_w + gx;
      const float t = att[i] / hi;
      const ImVec2 a(x0 + float(gx) * cw, y0 + float(gy) * ch), b(a.x + cw, a.y + ch);
      if (kept && kept[i] <= 0) {
        dl->AddRectFilled(a, b, IM_COL32(20, 20, 24, 200));
        dl->AddLine(a, b, IM_COL32(230, 60, 60, 200));
        continue;
      }
      dl->AddRectFilled(a, b, colormap_u32(cm, t, int(60 + 150 * t)));
    }
}

}  // namespace

void Canvas::build_image(float x0, float y0, float x1, float y1) {
  const ImageDoc& im = doc_->image;
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  if (!im.present) {
    ImGui::TextDisabled(
        "No image: open an image with a vision model (Model dock: default-vision).");
    return;
  }
  static const char* modes[] = {"per head", "mean over heads", "rollout (dense)"};
  for (int m = 0; m < 3; ++m) {
    if (m) ImGui::SameLine();
    if (ImGui::RadioButton(modes[m], settings_.image_mode == m)) settings_.image_mode = m;
  }
  ImGui::SameLine(0, 20);
  if (settings_.image_mode == 2)
    ImGui::Text("CLS attention rolled out over all layers   dense prediction: %s",
                im.predicted.c_str());
  else
    ImGui::Text("CLS attention, layer %d   dense prediction: %s", doc_->heat.layer,
                im.predicted.c_str());
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  const int np = int(im.cls_attn.size());
  const float top = y0 + line * 3;
  const int grid = im.grid_h * im.grid_w;
  auto title = [&](const std::string& t, float x, float y, float room) {
    const std::string s = fit_label(t, room);
    note_fit(s, room);
    dl->AddText(ImVec2(x, y), text_color(), s.c_str());
    return s;
  };
  if (settings_.image_mode == 0) {
    // One row per panel (its title above), one image per head, each labelled.
    const float gap = 10;
    const float side =
        std::max(16.f, std::min((x1 - x0) / float(std::max(1, im.heads)) - gap,
                                (y1 - top) / float(std::max(1, np)) - 2 * line - 12));
    for (int p = 0; p < np; ++p) {
      const float y = top + float(p) * (side + 2 * line + 12);
      const std::string t = title(im.panel_titles[size_t(p)], x0, y, x1 - x0);
      mark("image.title", t, x0, y, x0 + ImGui::CalcTextSize(t.c_str()).x, y + line);
      for (int h = 0; h < im.heads; ++h) {
        const float x = x0 + float(h) * (side + gap), iy = y + 2 * line + 4;
        const std::string hl = title("head " + std::to_string(h), x, y + line + 2, side);
        mark("image.head_label", hl, x, y + line + 2, x + ImGui::CalcTextSize(hl.c_str()).x,
             y + 2 * line + 2);
        const float* kept =
            im.kept[size_t(p)].empty() ? nullptr : &im.kept[size_t(p)][size_t(h * grid)];
        draw_overlay(dl, im, &im.cls_attn[size_t(p)][size_t(h * grid)], kept, x, iy, side,
                     settings_.colormap);
        mark("image.panel", im.panel_titles[size_t(p)] + " / " + hl, x, iy, x + side, iy + side);
      }
    }
    return;
  }
  if (settings_.image_mode == 2) {
    // Rollout exists for the dense model only: one map, and a caption that says so.
    const std::string caption =
        "Attention rollout is computed for the dense model only (its attention multiplied "
        "through every layer), so there is one map. Compare the variants under \"per head\" or "
        "\"mean over heads\".";
    const float wrap_w = std::min(x1 - x0, ImGui::GetFontSize() * 40);
    const std::vector<std::string> lines = wrap_parts(caption, wrap_w, " ");
    const float cap_h = float(lines.size()) * line;
    const float side =
        std::max(16.f, std::min(std::min(x1 - x0, wrap_w), y1 - top - line - 4 - cap_h - 10));
    const std::string t = title(
        im.rollout.empty() ? "rollout: not available" : "rollout (dense model)", x0, top, x1 - x0);
    mark("image.title", t, x0, top, x0 + ImGui::CalcTextSize(t.c_str()).x, top + line);
    const float iy = top + line + 4;
    if (!im.rollout.empty()) {
      draw_overlay(dl, im, im.rollout.data(), nullptr, x0, iy, side, settings_.colormap);
      mark("image.panel", t, x0, iy, x0 + side, iy + side);
    }
    float cy = iy + (im.rollout.empty() ? 0 : side) + 8;
    for (const std::string& l : lines) {
      note_fit(l, wrap_w);
      dl->AddText(ImVec2(x0, cy), dim_text_color(), l.c_str());
      mark("image.caption", l, x0, cy, x0 + ImGui::CalcTextSize(l.c_str()).x, cy + line);
      cy += line;
    }
    return;
  }
  const int cols = std::max(1, np);
  float side = std::max(16.f, std::min((x1 - x0) / float(cols) - 16, y1 - top - line * 3));
  // Titles (variant, predicted class, agreement) wrap at their separators, never cut: the
  // images start below the tallest.
  size_t title_lines = 1;
  for (int p = 0; p < np; ++p)
    title_lines = std::max(title_lines, wrap_parts(im.panel_titles[size_t(p)], side).size());
  side = std::max(16.f, std::min(side, y1 - top - line * float(title_lines + 1)));
  const float img_top = top + line * float(title_lines);
  for (int p = 0; p < np; ++p) {
    const float x = x0 + float(p) * (side + 16);
    const std::vector<std::string> lines = wrap_parts(im.panel_titles[size_t(p)], side);
    std::string t;
    for (size_t k = 0; k < lines.size(); ++k) {
      const std::string drawn = title(lines[k], x, top + line * float(k), side);
      mark("image.title", drawn, x, top + line * float(k), x + ImGui::CalcTextSize(drawn.c_str()).x,
           top + line * float(k + 1));
      t += (k ? " \u00b7 " : "") + drawn;
    }
    std::vector<float> mean(size_t(grid), 0.f), kept_any(size_t(grid), 0.f);
    const std::vector<float>& a = im.cls_attn[size_t(p)];
    for (int h = 0; h < im.heads; ++h)
      for (int i = 0; i < grid; ++i) {
        mean[size_t(i)] += a[size_t(h * grid + i)] / float(im.heads);
        if (!im.kept[size_t(p)].empty())
          kept_any[size_t(i)] =
              std::max(kept_any[size_t(i)], im.kept[size_t(p)][size_t(h * grid + i)]);
      }
    draw_overlay(dl, im, mean.data(), im.kept[size_t(p)].empty() ? nullptr : kept_any.data(), x,
                 img_top + 4, side, settings_.colormap);
    mark("image.panel", t, x, img_top + 4, x + side, img_top + 4 + side);
  }
}

}  // namespace attn::render
