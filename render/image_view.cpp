// Image view: the CLS token's attention over the image patches, per head, as the mean over
// heads, or as the dense model's rollout across layers; patches a variant dropped are hatched.
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
  ImGui::Text("CLS attention, layer %d   dense prediction: %s", doc_->heat.layer,
              im.predicted.c_str());
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetTextLineHeight();
  const int np = int(im.cls_attn.size());
  const float top = y0 + line * 3;
  const int grid = im.grid_h * im.grid_w;
  if (settings_.image_mode == 0) {
    const float side = std::min((x1 - x0) / float(std::max(1, im.heads)) - 10,
                                (y1 - top) / float(std::max(1, np)) - line - 10);
    for (int p = 0; p < np; ++p) {
      const float y = top + float(p) * (side + line + 10);
      dl->AddText(ImVec2(x0, y), text_color(), im.panel_titles[size_t(p)].c_str());
      for (int h = 0; h < im.heads; ++h) {
        const float x = x0 + float(h) * (side + 10);
        const float* kept =
            im.kept[size_t(p)].empty() ? nullptr : &im.kept[size_t(p)][size_t(h * grid)];
        draw_overlay(dl, im, &im.cls_attn[size_t(p)][size_t(h * grid)], kept, x, y + line + 2, side,
                     settings_.colormap);
      }
    }
    return;
  }
  const int cols = std::max(1, np);
  const float side = std::min((x1 - x0) / float(cols) - 16, y1 - top - line * 2);
  for (int p = 0; p < np; ++p) {
    const float x = x0 + float(p) * (side + 16);
    dl->AddText(ImVec2(x, top), text_color(),
                clip_label(im.panel_titles[size_t(p)], int(side / 7)).c_str());
    std::vector<float> mean(size_t(grid), 0.f), kept_any(size_t(grid), 0.f);
    const std::vector<float>& a = im.cls_attn[size_t(p)];
    for (int h = 0; h < im.heads; ++h)
      for (int i = 0; i < grid; ++i) {
        mean[size_t(i)] += a[size_t(h * grid + i)] / float(im.heads);
        if (!im.kept[size_t(p)].empty())
          kept_any[size_t(i)] =
              std::max(kept_any[size_t(i)], im.kept[size_t(p)][size_t(h * grid + i)]);
      }
    const bool rollout = settings_.image_mode == 2 && !im.rollout.empty();
    draw_overlay(dl, im, rollout ? im.rollout.data() : mean.data(),
                 im.kept[size_t(p)].empty() || rollout ? nullptr : kept_any.data(), x,
                 top + line + 4, side, settings_.colormap);
  }
}

}  // namespace attn::render
