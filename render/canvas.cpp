#include "render/canvas.h"

#include <backends/imgui_impl_vulkan.h>
#include <imgui.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "render/colormap.h"
#include "render/draw_util.h"
#include "render/heatmap_pipeline.h"
#include "render/imgui_layer.h"
#include "render/number_format.h"
#include "render/sampled_image.h"

namespace attn::render {

struct Canvas::Panel {
  std::unique_ptr<SampledImage> image;
  VkDescriptorSet set = VK_NULL_HANDLE;
  PanelTile tile;  // the latest cells (texels stay for the drop bars and scale)
  bool has_tile = false;
  bool dirty = false;  // not yet uploaded
  ColorScale colored;  // scale the uploaded colours were made with
  std::vector<uint8_t> rgba;
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // heatmap rectangle this frame, logical px
};

const char* view_name(ViewKind v) {
  switch (v) {
    case ViewKind::Heatmaps:
      return "Heatmaps";
    case ViewKind::HeadGrid:
      return "Head grid";
    case ViewKind::Sinks:
      return "Sinks";
    case ViewKind::Tokens:
      return "Tokens";
    case ViewKind::Image:
      return "Image";
    case ViewKind::Tradeoff:
      return "Trade-off";
    case ViewKind::Attribution:
      return "Attribution";
    case ViewKind::Qk:
      return "Q/K map";
    case ViewKind::Steps:
      return "Step-through";
  }
  return "?";
}

Canvas::Canvas(const RenderTarget& target, const FontSpec& fonts) : target_(target) {
  imgui_ = std::make_unique<ImGuiLayer>(target, fonts.path, fonts.size, fonts.presentation_size);
  pipeline_ = std::make_unique<HeatmapPipeline>(target);
}

Canvas::~Canvas() {
  vkDeviceWaitIdle(target_.device);
  for (auto& p : panels_) pipeline_->free_set(p->set);
  panels_.clear();
}

void Canvas::set_document(std::shared_ptr<const Document> doc) {
  const bool reshaped =
      !doc_ || !doc || doc_->heat.n_q != doc->heat.n_q || doc_->heat.n_k != doc->heat.n_k;
  doc_ = std::move(doc);
  const size_t n = doc_ ? doc_->heat.panels.size() : 0;
  while (panels_.size() < n) {
    auto p = std::make_unique<Panel>();
    p->image = std::make_unique<SampledImage>(target_, VK_FORMAT_R8G8B8A8_UNORM, 4);
    panels_.push_back(std::move(p));
  }
  // Extra panels keep their textures (cheap) but are not drawn.
  for (size_t i = n; i < panels_.size(); ++i) panels_[i]->has_tile = false;
  if (reshaped) reset_view();
  hover_gen_ = row_gen_ = ~0ull;
  redraw_frames_ = 3;
}

void Canvas::set_tiles(uint64_t generation, std::vector<PanelTile> tiles) {
  if (!doc_ || generation != doc_->generation) return;
  for (size_t i = 0; i < tiles.size() && i < panels_.size(); ++i) {
    panels_[i]->tile = std::move(tiles[i]);
    panels_[i]->has_tile = panels_[i]->tile.w > 0 && panels_[i]->tile.h > 0;
    panels_[i]->dirty = panels_[i]->has_tile;
  }
  redraw_frames_ = 3;
}

void Canvas::reset_view() {
  region_ = {};
  if (doc_) {
    region_.q1 = doc_->heat.n_q;
    region_.k1 = doc_->heat.n_k;
  }
  update_want();
}

void Canvas::clear_color(float out[4]) const {
  const float v = settings_.dark ? 0.11f : 0.94f;
  out[0] = v;
  out[1] = v;
  out[2] = v + (settings_.dark ? 0.01f : 0.0f);
  out[3] = 1;
}

std::vector<std::array<float, 4>> Canvas::panel_rects() const {
  std::vector<std::array<float, 4>> out;
  if (!doc_) return out;
  for (size_t i = 0; i < doc_->heat.panels.size() && i < panels_.size(); ++i)
    out.push_back({panels_[i]->x0, panels_[i]->y0, panels_[i]->x1, panels_[i]->y1});
  return out;
}

void Canvas::update_want() {
  TileWant w;
  if (doc_ && doc_->heat.n_q > 0) {
    w.q0 = std::clamp(int(std::floor(region_.q0)), 0, doc_->heat.n_q - 1);
    w.q1 = std::clamp(int(std::ceil(region_.q1)), w.q0 + 1, doc_->heat.n_q);
    w.k0 = std::clamp(int(std::floor(region_.k0)), 0, doc_->heat.n_k - 1);
    w.k1 = std::clamp(int(std::ceil(region_.k1)), w.k0 + 1, doc_->heat.n_k);
    const float s = std::max(1.f, fb_scale_);
    w.w = std::clamp(int(heat_px_w_ * s), 1, 2048);
    w.h = std::clamp(int(heat_px_h_ * s), 1, 2048);
    w.w = std::min(w.w, w.k1 - w.k0);
    w.h = std::min(w.h, w.q1 - w.q0);
  }
  if (w.q0 != want_.q0 || w.q1 != want_.q1 || w.k0 != want_.k0 || w.k1 != want_.k1 ||
      w.w != want_.w || w.h != want_.h) {
    w.serial = want_.serial + 1;
    want_ = w;
  }
}

void Canvas::build_frame(const FrameInput& in) {
  ImGuiIO& io = ImGui::GetIO();
  width_ = in.width;
  height_ = in.height;
  fb_scale_ = in.dpr;
  io.DisplaySize = ImVec2(in.width, in.height);
  io.DisplayFramebufferScale = ImVec2(in.dpr, in.dpr);
  io.DeltaTime = std::max(1e-4f, in.dt);
  io.MousePos = ImVec2(in.mouse_x, in.mouse_y);
  for (int i = 0; i < 3; ++i) io.MouseDown[i] = in.mouse_down[i];
  io.MouseWheel += in.wheel;
  io.KeyCtrl = in.ctrl;
  io.KeyShift = in.shift;
  for (unsigned c : in.chars) io.AddInputCharacter(c);
  imgui_->apply_theme(settings_.dark, settings_.presentation);

  ImGui_ImplVulkan_NewFrame();
  ImGui::NewFrame();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowBorderSize, 0);
  ImGui::Begin("##canvas", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoBackground |
                   ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PopStyleVar();
  building_overflows_.clear();
  building_marks_.clear();
  build_toolbar();
  const float top = ImGui::GetCursorScreenPos().y + 2;
  const float pad = 8;
  const float x0 = pad, y0 = top, x1 = in.width - pad, y1 = in.height - pad;
  for (auto& p : panels_) p->x0 = p->x1 = p->y0 = p->y1 = 0;
  hover_panel_ = -1;
  if (!doc_) {
    const char* msg = "Waiting for the first analysis...";
    const ImVec2 sz = ImGui::CalcTextSize(msg);
    ImGui::GetWindowDrawList()->AddText(ImVec2((x0 + x1 - sz.x) / 2, (y0 + y1 - sz.y) / 2),
                                        dim_text_color(), msg);
  } else {
    switch (settings_.view) {
      case ViewKind::Heatmaps:
        build_heatmaps(x0, y0, x1, y1);
        break;
      case ViewKind::HeadGrid:
        build_head_grid(x0, y0, x1, y1);
        break;
      case ViewKind::Sinks:
        build_sinks(x0, y0, x1, y1);
        break;
      case ViewKind::Tokens:
        build_tokens(x0, y0, x1, y1);
        break;
      case ViewKind::Image:
        build_image(x0, y0, x1, y1);
        break;
      case ViewKind::Tradeoff:
        build_tradeoff(x0, y0, x1, y1);
        break;
      case ViewKind::Attribution:
        build_attribution(x0, y0, x1, y1);
        break;
      case ViewKind::Qk:
        build_qk(x0, y0, x1, y1);
        break;
      case ViewKind::Steps:
        build_steps(x0, y0, x1, y1);
        break;
    }
  }
  ImGui::End();
  if (settings_.view == ViewKind::Heatmaps) draw_inspector();
  ImGui::Render();
  overflows_.swap(building_overflows_);
  marks_.swap(building_marks_);
  ++frames_;
  if (redraw_frames_ > 0) --redraw_frames_;
  if (io.MouseDown[0] || io.MouseWheel != 0 || ImGui::IsAnyItemActive()) redraw_frames_ = 2;
}

void Canvas::build_toolbar() {
  ImGui::SetCursorScreenPos(ImVec2(8, 6));
  const ImGuiStyle& st = ImGui::GetStyle();
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowWidth() - 8;
  // The next item goes on this line when `w` more pixels fit, else on a new line (presentation
  // mode's large font needs two rows; nothing is pushed off the window).
  bool first = true;
  auto place = [&](float w, float spacing) {
    if (!first && ImGui::GetItemRectMax().x + spacing + w <= right) ImGui::SameLine(0, spacing);
    first = false;
  };
  auto button_w = [&](const char* label) {
    return ImGui::CalcTextSize(label).x + st.FramePadding.x * 2;
  };
  auto check_w = [&](const char* label) {
    return ImGui::GetFrameHeight() + st.ItemInnerSpacing.x + ImGui::CalcTextSize(label).x;
  };
  for (int v = 0; v < kViewCount; ++v) {
    place(button_w(view_name(ViewKind(v))), 2);
    const bool on = int(settings_.view) == v;
    if (on) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetColorU32(ImGuiCol_ButtonActive));
    if (ImGui::Button(view_name(ViewKind(v)))) settings_.view = ViewKind(v);
    if (on) ImGui::PopStyleColor();
  }
  const float em = ImGui::GetFontSize();
  if (settings_.view == ViewKind::Heatmaps) {
    static const char* modes[] = {"Probabilities", "Kept set on dense", "Difference vs dense"};
    int mode = int(settings_.mode);
    place(em * 11, 16);
    ImGui::SetNextItemWidth(em * 11);
    if (ImGui::Combo("##mode", &mode, modes, 3)) settings_.mode = DisplayMode(mode);
  }
  if (settings_.view == ViewKind::Attribution) {
    // Signed scores have their own diverging scale: no colour map or log; text chooses between
    // token chips and compact cells.
    if (doc_ && doc_->attribution.present && !doc_->attribution.image) {
      static const char* layouts[] = {"auto layout", "token chips", "compact cells"};
      float lw = 0;
      for (const char* l : layouts) lw = std::max(lw, ImGui::CalcTextSize(l).x);
      lw += ImGui::GetFrameHeight() + st.FramePadding.x * 2;
      place(lw, 16);
      ImGui::SetNextItemWidth(lw);
      settings_.attribution_layout = std::clamp(settings_.attribution_layout, 0, 2);
      ImGui::Combo("##attr_layout", &settings_.attribution_layout, layouts, 3);
    }
  } else if (settings_.view != ViewKind::Qk && settings_.view != ViewKind::Steps) {
    // (the Q/K map colours by position, the step-through by sign: no colour map there)
    // Every map of the shared table (render/colormap.h), in its order.
    static const std::vector<const char*> cmaps = [] {
      std::vector<const char*> out;
      for (int i = 0; i < kColormapCount; ++i) out.push_back(colormap_name(Colormap(i)));
      return out;
    }();
    int cm = int(settings_.colormap);
    float widest = 0;
    for (const char* name : cmaps) widest = std::max(widest, ImGui::CalcTextSize(name).x);
    const float cmap_w = widest + ImGui::GetFrameHeight() + st.FramePadding.x * 2;
    place(cmap_w, settings_.view == ViewKind::Heatmaps ? st.ItemSpacing.x : 16);
    ImGui::SetNextItemWidth(cmap_w);
    if (ImGui::Combo("##cmap", &cm, cmaps.data(), kColormapCount))
      settings_.colormap = Colormap(cm);
    place(check_w("log"), st.ItemSpacing.x);
    ImGui::Checkbox("log", &settings_.log_scale);
  }
  if (settings_.view == ViewKind::Heatmaps) {
    place(check_w("outlines"), st.ItemSpacing.x);
    ImGui::Checkbox("outlines", &settings_.outlines);
    place(button_w("Reset zoom"), st.ItemSpacing.x);
    if (ImGui::Button("Reset zoom")) reset_view();
  }
  if (doc_) {
    // The title takes the rest of the line, elided (whole on hover)
    // (the status bar holds it too, so it is left out where the line has no room).
    const float room = right - ImGui::GetItemRectMax().x - 16;
    if (room >= em * 12) {
      ImGui::SameLine(0, 16);
      const std::string t = fit_label(doc_->title, room);
      ImGui::TextDisabled("%s", t.c_str());
      if (t != doc_->title && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", doc_->title.c_str());
    }
  }
}

void Canvas::build_heatmaps(float x0, float y0, float x1, float y1) {
  const HeatmapDoc& h = doc_->heat;
  const int n = int(h.panels.size());
  if (n == 0 || h.n_q == 0) return;
  // The colour bar's column holds its widest tick label and its caption (no fixed pixel width:
  // presentation mode's font is larger).
  const float tick_w = std::max(ImGui::CalcTextSize("0.0001").x, ImGui::CalcTextSize("+0.0012").x);
  const float colorbar_w = 18 + 12 + 6 + tick_w + 8;
  const int cols = n <= 3 ? n : n == 4 ? 2 : 3;
  const int rows = (n + cols - 1) / cols;
  const float line = ImGui::GetTextLineHeight();
  const float gap = 14;
  const float cell_w = (x1 - x0 - colorbar_w - gap * float(cols - 1)) / float(cols);
  const float cell_h = (y1 - y0 - gap * float(rows - 1)) / float(rows);

  // Each panel's statistics wrap at their " · " separators, never cut: the title block is as
  // tall as the panel needing most lines, counted with every number at its widest so that the
  // panels stay put when a parameter changes the values (a time of 9.87 ms becoming 10.12 ms
  // could wrap one more line and move every map down by it).
  std::vector<std::vector<std::string>> stats(static_cast<size_t>(n));
  size_t stat_lines = 1;
  for (int p = 0; p < n; ++p) {
    const std::string& text = h.panels[size_t(p)].stats;
    stats[size_t(p)] = wrap_parts(text, cell_w - 4);
    stat_lines = std::max({stat_lines, stats[size_t(p)].size(),
                           wrap_parts(with_widest_numbers(text), cell_w - 4).size()});
  }
  const float title_h = float(1 + stat_lines) * line + 6;
  const float drop_w = 14;

  // Axes: token labels where each row / column has room for one at kMinLabelScale of the font or
  // more (smaller on short inputs, so that a sentence or two shows its tokens at default zoom),
  // else index ticks. The margins hold the widest label at the scale drawn, and the decision is
  // made on the heatmap size those margins leave, so it holds in the frame it is drawn.
  constexpr float kMinLabelScale = 0.7f;
  if (label_doc_ != doc_.get() || label_gen_ != doc_->generation ||
      label_font_ != ImGui::GetFontSize()) {
    auto widest = [](const std::vector<std::string>& v) {
      float w = 0;
      for (const std::string& s : v)
        w = std::max(w, ImGui::CalcTextSize(clip_label(s, 10).c_str()).x);
      return w;
    };
    label_doc_ = doc_.get();
    label_gen_ = doc_->generation;
    label_font_ = ImGui::GetFontSize();
    label_w_q_ = widest(h.q_labels);
    label_w_k_ = widest(h.k_labels);
  }
  const double rq = std::max(1e-9, region_.q1 - region_.q0);
  const double rk = std::max(1e-9, region_.k1 - region_.k0);
  float row_scale = 0, col_scale = 0, ml = 46, mt = line + 6;
  for (int tries = 0; tries < 4; ++tries) {
    const bool rows_on = tries < 2 && !h.q_labels.empty();
    const bool cols_on = tries % 2 == 0 && !h.k_labels.empty();
    // The scale the rows / columns allow with full-size labels in the margins (a lower bound:
    // smaller labels leave more room).
    const float full_w = cell_w - (rows_on ? label_w_q_ + 12 : 46) - drop_w - 4;
    const float full_h = cell_h - title_h - (cols_on ? label_w_k_ + 8 : line + 6);
    const float sr = rows_on ? std::min(1.f, float(full_h / rq) / line) : 0;
    const float sc = cols_on ? std::min(1.f, float(full_w / rk) / line) : 0;
    if ((rows_on && sr < kMinLabelScale) || (cols_on && sc < kMinLabelScale)) continue;
    row_scale = sr;
    col_scale = sc;
    ml = rows_on ? label_w_q_ * sr + 12 : 46;
    mt = cols_on ? label_w_k_ * sc + 8 : line + 6;
    break;
  }

  heat_px_w_ = std::max(8.f, cell_w - ml - drop_w - 4);
  heat_px_h_ = std::max(8.f, cell_h - title_h - mt);
  for (int p = 0; p < n; ++p) {
    const int r = p / cols, c = p % cols;
    const float cx = x0 + float(c) * (cell_w + gap), cy = y0 + float(r) * (cell_h + gap);
    Panel& pan = *panels_[size_t(p)];
    pan.x0 = cx + ml;
    pan.y0 = cy + title_h + mt;
    pan.x1 = pan.x0 + heat_px_w_;
    pan.y1 = pan.y0 + heat_px_h_;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const PanelDesc& d = h.panels[size_t(p)];
    // A long spec is elided, and shown whole on hover.
    const std::string title = fit_label(d.title, cell_w - 4);
    dl->AddText(ImVec2(cx, cy), text_color(), title.c_str());
    if (title != d.title &&
        ImGui::IsMouseHoveringRect(ImVec2(cx, cy), ImVec2(cx + cell_w, cy + line)))
      ImGui::SetTooltip("%s", d.title.c_str());
    for (size_t k = 0; k < stats[size_t(p)].size(); ++k) {
      const std::string& sl = stats[size_t(p)][k];
      note_fit(sl, cell_w - 4);
      dl->AddText(ImVec2(cx, cy + float(k + 1) * line + 2), dim_text_color(), sl.c_str());
    }
    // What each number covers (the head's own, or the layer's), on hover.
    if (!d.stats_tip.empty() &&
        ImGui::IsMouseHoveringRect(
            ImVec2(cx, cy + line),
            ImVec2(cx + cell_w, cy + float(stats[size_t(p)].size() + 1) * line + 2)))
      ImGui::SetTooltip("%s", d.stats_tip.c_str());
    draw_heat_panel(p, pan.x0, pan.y0, pan.x1, pan.y1, row_scale, col_scale);
  }
  // A spare grid cell holds the comparison table.
  if (n < rows * cols) {
    const int r = n / cols, c = n % cols;
    const float cx = x0 + float(c) * (cell_w + gap), cy = y0 + float(r) * (cell_h + gap);
    draw_summary(cx, cy, cx + cell_w * float(rows * cols - n) + gap * float(rows * cols - n - 1),
                 cy + cell_h);
  }
  handle_heat_input(x0, y0, x1, y1);
  draw_colorbar(x1 - colorbar_w + 18, y0 + title_h + mt, x1 - colorbar_w + 30,
                y0 + title_h + mt + std::min(heat_px_h_, 320.f));
  update_want();
}

// A heatmap panel's rectangle and the region of the matrix it shows: matrix coordinates to screen.
struct HeatFrame {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  Canvas::Region region;
  float sx(double k) const {
    return float(x0 + (k - region.k0) / (region.k1 - region.k0) * (x1 - x0));
  }
  float sy(double q) const {
    return float(y0 + (q - region.q0) / (region.q1 - region.q0) * (y1 - y0));
  }
};

void Canvas::draw_heat_panel(int p, float x0, float y0, float x1, float y1, float row_scale,
                             float col_scale) {
  const HeatmapDoc& h = doc_->heat;
  const Panel& pan = *panels_[size_t(p)];
  const PanelDesc& d = h.panels[size_t(p)];
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const HeatFrame f{x0, y0, x1, y1, region_};

  if (!pan.has_tile) {
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), ImGui::GetColorU32(ImGuiCol_FrameBg));
    dl->AddText(ImVec2(x0 + 8, y0 + 8), dim_text_color(), "computing...");
  }
  dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x1 + 1, y1 + 1), frame_color());

  // Axes: token labels at the scale build_heatmaps chose, else index ticks.
  draw_heat_row_axis(p, f, row_scale);
  draw_heat_col_axis(p, f, col_scale);

  dl->PushClipRect(ImVec2(x0, y0), ImVec2(x1 + 20, y1), true);
  if (settings_.outlines && !d.reference && settings_.mode != DisplayMode::Difference)
    draw_kept_blocks(d, f);
  if (!d.reference && pan.has_tile && !pan.tile.dropped_rows.empty())
    draw_lost_mass(d, pan.tile, f);
  dl->PopClipRect();

  // The lesson step's cells: a magenta box with a dark rim, at least 10 px wide when the cell
  // is smaller, so it shows on any colour map and at any zoom.
  dl->PushClipRect(ImVec2(x0 - 6, y0 - 6), ImVec2(x1 + 6, y1 + 6), true);
  for (const auto& [q, k] : settings_.highlight_cells) {
    if (q < 0 || k < 0 || q >= h.n_q || k >= h.n_k) continue;
    const float cx = (f.sx(k) + f.sx(k + 1)) / 2, cy = (f.sy(q) + f.sy(q + 1)) / 2;
    const float hw = std::max(5.f, (f.sx(k + 1) - f.sx(k)) / 2),
                hh = std::max(5.f, (f.sy(q + 1) - f.sy(q)) / 2);
    if (cx + hw < x0 || cx - hw > x1 || cy + hh < y0 || cy - hh > y1) continue;
    dl->AddRect(ImVec2(cx - hw - 2, cy - hh - 2), ImVec2(cx + hw + 2, cy + hh + 2),
                IM_COL32(0, 0, 0, 200), 0, 0, 1.5f);
    dl->AddRect(ImVec2(cx - hw, cy - hh), ImVec2(cx + hw, cy + hh), kHighlightColor, 0, 0, 3);
    if (p == 0)
      mark("heat.highlight", std::to_string(q) + "," + std::to_string(k), cx - hw, cy - hh, cx + hw,
           cy + hh);
  }
  dl->PopClipRect();

  // Synchronised hover: the hovered cell in every panel.
  if (hover_q_ >= 0 && hover_k_ >= 0) {
    const float cx0 = f.sx(hover_k_), cx1 = f.sx(hover_k_ + 1), cy0 = f.sy(hover_q_),
                cy1 = f.sy(hover_q_ + 1);
    dl->PushClipRect(ImVec2(x0, y0), ImVec2(x1, y1), true);
    if (cx1 - cx0 >= 4) {
      dl->AddRect(ImVec2(cx0, cy0), ImVec2(cx1, cy1), IM_COL32(255, 255, 255, 230), 0, 0, 2);
    } else {
      dl->AddLine(ImVec2(x0, (cy0 + cy1) / 2), ImVec2(x1, (cy0 + cy1) / 2),
                  IM_COL32(255, 255, 255, 70));
      dl->AddLine(ImVec2((cx0 + cx1) / 2, y0), ImVec2((cx0 + cx1) / 2, y1),
                  IM_COL32(255, 255, 255, 70));
    }
    dl->PopClipRect();
  }
}

void Canvas::draw_heat_row_axis(int p, const HeatFrame& f, float row_scale) {
  const HeatmapDoc& h = doc_->heat;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float x0 = f.x0, y0 = f.y0, y1 = f.y1, line = ImGui::GetTextLineHeight();
  dl->PushClipRect(ImVec2(x0 - 400, y0 - line), ImVec2(x0, y1 + line), false);
  const int iq0 = std::max(0, int(std::floor(region_.q0))),
            iq1 = std::min(h.n_q, int(std::ceil(region_.q1)));
  if (row_scale > 0) {
    ImGui::SetWindowFontScale(row_scale);
    for (int q = iq0; q < iq1; ++q) {
      const std::string s = clip_label(h.q_labels[size_t(q)], 10);
      const ImVec2 sz = ImGui::CalcTextSize(s.c_str());
      const float y = (f.sy(q) + f.sy(q + 1) - sz.y) / 2;
      note_fit(s, label_w_q_ * row_scale + 6);
      dl->AddText(ImVec2(x0 - 6 - sz.x, y),
                  highlighted(q)         ? kHighlightColor
                  : q == settings_.query ? IM_COL32(255, 170, 40, 255)
                                         : text_color(),
                  s.c_str());
      if (p == 0) mark("heat.row_label", s, x0 - 6 - sz.x, y, x0 - 6, y + sz.y);
    }
    ImGui::SetWindowFontScale(1);
  } else {
    const double rq = region_.q1 - region_.q0;
    const int step = nice_step(rq, std::max(2, int((y1 - y0) / (line * 2.5f))));
    for (int q = (iq0 + step - 1) / step * step; q < iq1; q += step) {
      const std::string s = std::to_string(q);
      const ImVec2 sz = ImGui::CalcTextSize(s.c_str());
      const float y = f.sy(q + 0.5);
      dl->AddLine(ImVec2(x0 - 4, y), ImVec2(x0, y), dim_text_color());
      dl->AddText(ImVec2(x0 - 6 - sz.x, y - sz.y / 2), dim_text_color(), s.c_str());
    }
  }
  // Highlighted tokens: a magenta bar beside their row, with labels or ticks.
  for (int t : settings_.highlight_tokens)
    if (t >= iq0 && t < iq1) {
      dl->AddRectFilled(ImVec2(x0 - 4, std::max(y0, f.sy(t))),
                        ImVec2(x0 - 1, std::min(y1, std::max(f.sy(t + 1), f.sy(t) + 2))),
                        kHighlightColor);
      if (p == 0)
        mark("heat.highlight_row", std::to_string(t), x0 - 4, f.sy(t), x0 - 1, f.sy(t + 1));
    }
  dl->PopClipRect();
}

void Canvas::draw_heat_col_axis(int p, const HeatFrame& f, float col_scale) {
  const HeatmapDoc& h = doc_->heat;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float x0 = f.x0, y0 = f.y0, x1 = f.x1, line = ImGui::GetTextLineHeight();
  const int ik0 = std::max(0, int(std::floor(region_.k0))),
            ik1 = std::min(h.n_k, int(std::ceil(region_.k1)));
  std::vector<char> is_sink(size_t(h.n_k), 0);
  for (int s : h.sinks)
    if (s >= 0 && s < h.n_k) is_sink[size_t(s)] = 1;
  // Highlighted tokens: a magenta bar above their column, with labels or ticks.
  for (int t : settings_.highlight_tokens)
    if (t >= ik0 && t < ik1) {
      dl->AddRectFilled(ImVec2(std::max(x0, f.sx(t)), y0 - 4),
                        ImVec2(std::min(x1, std::max(f.sx(t + 1), f.sx(t) + 2)), y0 - 1),
                        kHighlightColor);
      if (p == 0)
        mark("heat.highlight_col", std::to_string(t), f.sx(t), y0 - 4, f.sx(t + 1), y0 - 1);
    }
  if (col_scale > 0) {
    ImGui::SetWindowFontScale(col_scale);
    const float lh = ImGui::GetTextLineHeight();
    for (int k = ik0; k < ik1; ++k) {
      const std::string s = clip_label(h.k_labels[size_t(k)], 9);
      const float x = (f.sx(k) + f.sx(k + 1) - lh) / 2, len = ImGui::CalcTextSize(s.c_str()).x;
      note_fit(s, label_w_k_ * col_scale + 4);
      const ImU32 sink_col =
          settings_.dark ? IM_COL32(255, 150, 30, 255) : IM_COL32(180, 85, 0, 255);
      add_text_vertical(dl, ImVec2(x, y0 - 4),
                        highlighted(k)       ? kHighlightColor
                        : is_sink[size_t(k)] ? sink_col
                                             : text_color(),
                        s.c_str());
      if (p == 0) mark("heat.col_label", s, x, y0 - 4 - len, x + lh, y0 - 4);
    }
    ImGui::SetWindowFontScale(1);
    return;
  }
  const double rk = region_.k1 - region_.k0;
  const int step = nice_step(rk, std::max(2, int((x1 - x0) / (line * 4))));
  dl->PushClipRect(ImVec2(x0 - 20, y0 - line - 8), ImVec2(x1 + 20, y0), false);
  for (int k = (ik0 + step - 1) / step * step; k < ik1; k += step) {
    const std::string s = std::to_string(k);
    const ImVec2 sz = ImGui::CalcTextSize(s.c_str());
    const float x = f.sx(k + 0.5);
    dl->AddLine(ImVec2(x, y0 - 4), ImVec2(x, y0), dim_text_color());
    dl->AddText(ImVec2(x - sz.x / 2, y0 - 4 - sz.y), dim_text_color(), s.c_str());
  }
  dl->PopClipRect();
  // Sinks as orange marks on the key axis.
  for (int s : h.sinks)
    if (s >= ik0 && s < ik1)
      dl->AddTriangleFilled(ImVec2(f.sx(s + 0.5) - 4, y0 - 7), ImVec2(f.sx(s + 0.5) + 4, y0 - 7),
                            ImVec2(f.sx(s + 0.5), y0 - 1), IM_COL32(255, 150, 30, 255));
}

void Canvas::draw_kept_blocks(const PanelDesc& d, const HeatFrame& f) {
  // Kept blocks of block-sparse variants, outlined where they are big enough to see.
  // Many small outlines cost software rasterisers dearly and say little: above a few hundred
  // visible blocks the kept-set mode shows the structure instead.
  ImDrawList* dl = ImGui::GetWindowDrawList();
  std::vector<ImVec4> boxes;
  for (const BlockRect& b : d.kept_blocks) {
    if (b.q1 <= region_.q0 || b.q0 >= region_.q1 || b.k1 <= region_.k0 || b.k0 >= region_.k1)
      continue;
    const float bx0 = f.sx(b.k0), bx1 = f.sx(b.k1), by0 = f.sy(b.q0), by1 = f.sy(b.q1);
    if (bx1 - bx0 < 6 || by1 - by0 < 6) continue;
    boxes.push_back(ImVec4(bx0, by0, bx1, by1));
    if (boxes.size() > 400) break;
  }
  if (boxes.size() <= 400)
    for (const ImVec4& b : boxes)
      dl->AddRect(ImVec2(b.x, b.y), ImVec2(b.z, b.w), IM_COL32(255, 255, 255, 150));
}

void Canvas::draw_lost_mass(const PanelDesc& d, const PanelTile& t, const HeatFrame& f) {
  // Dense mass dropped per query row, as a red strip to the right: a red per theme whose full
  // shade stands out from the background at 4.5:1 or more, fading with the mass.
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float y0 = f.y0, x1 = f.x1, y1 = f.y1;
  const bool dark = settings_.dark;
  auto lost_color = [dark](int level) {  // level 0..16
    return dark ? IM_COL32(255, 80, 85, 50 + 205 * level / 16)
                : IM_COL32(190, 0, 25, 60 + 195 * level / 16);
  };
  mark("heat.lost_mass", d.title, x1 + 4, y0, x1 + 14, y1);
  // Runs of rows with the same shade become one rectangle.
  int run_start = 0, run_level = -1;
  auto flush = [&](int end) {
    if (run_level <= 0) return;
    const double qa = t.q0 + double(run_start) * (t.q1 - t.q0) / t.h;
    const double qb = t.q0 + double(end) * (t.q1 - t.q0) / t.h;
    const float ya = std::max(y0, f.sy(qa)), yb = std::min(y1, f.sy(qb));
    if (yb > ya)
      dl->AddRectFilled(ImVec2(x1 + 4, ya), ImVec2(x1 + 14, std::max(yb, ya + 1)),
                        lost_color(run_level));
  };
  dl->AddRectFilled(ImVec2(x1 + 4, y0), ImVec2(x1 + 14, y1),
                    dark ? IM_COL32(255, 80, 85, 25) : IM_COL32(190, 0, 25, 22));
  for (int y = 0; y <= t.h; ++y) {
    const int level =
        y < t.h ? int(std::lround(std::clamp(t.dropped_rows[size_t(y)], 0.f, 1.f) * 16)) : -2;
    if (level != run_level) {
      flush(y);
      run_start = y;
      run_level = level;
    }
  }
}

void Canvas::handle_heat_input(float ax0, float ay0, float ax1, float ay1) {
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 m = io.MousePos;
  int hp = -1;
  for (size_t p = 0; p < doc_->heat.panels.size(); ++p) {
    const Panel& pan = *panels_[p];
    if (m.x >= pan.x0 && m.x < pan.x1 && m.y >= pan.y0 && m.y < pan.y1) hp = int(p);
  }
  const bool ui_busy = ImGui::IsAnyItemActive() || ImGui::IsAnyItemHovered();
  hover_q_ = hover_k_ = -1;
  if (hp >= 0 && !ui_busy) {
    const Panel& pan = *panels_[size_t(hp)];
    const double fk = region_.k0 + (m.x - pan.x0) / (pan.x1 - pan.x0) * (region_.k1 - region_.k0);
    const double fq = region_.q0 + (m.y - pan.y0) / (pan.y1 - pan.y0) * (region_.q1 - region_.q0);
    hover_panel_ = hp;
    hover_q_ = std::clamp(int(fq), 0, doc_->heat.n_q - 1);
    hover_k_ = std::clamp(int(fk), 0, doc_->heat.n_k - 1);
    redraw_frames_ = std::max(redraw_frames_, 1);
    if (io.MouseWheel != 0) {
      const double f = std::pow(0.85, double(io.MouseWheel));
      auto zoom = [&](double& a, double& b, double at, double n) {
        const double min_span = std::min(n, 8.0);
        double span = std::clamp((b - a) * f, min_span, n);
        double na = at - (at - a) * span / (b - a);
        na = std::clamp(na, 0.0, n - span);
        a = na;
        b = na + span;
      };
      zoom(region_.k0, region_.k1, fk, doc_->heat.n_k);
      zoom(region_.q0, region_.q1, fq, doc_->heat.n_q);
    }
    if (ImGui::IsMouseDoubleClicked(0))
      reset_view();
    else if (ImGui::IsMouseClicked(0)) {
      dragging_ = true;
      drag_x_ = press_x_ = m.x;
      drag_y_ = press_y_ = m.y;
    }
  }
  if (dragging_) {
    if (!io.MouseDown[0]) {
      dragging_ = false;
      if (std::abs(m.x - press_x_) < 3 && std::abs(m.y - press_y_) < 3 && hover_q_ >= 0)
        settings_.query = hover_q_;
    } else if (heat_px_w_ > 0) {
      const double dk = -(m.x - drag_x_) / heat_px_w_ * (region_.k1 - region_.k0);
      const double dq = -(m.y - drag_y_) / heat_px_h_ * (region_.q1 - region_.q0);
      const double sk = region_.k1 - region_.k0, sq = region_.q1 - region_.q0;
      region_.k0 = std::clamp(region_.k0 + dk, 0.0, doc_->heat.n_k - sk);
      region_.k1 = region_.k0 + sk;
      region_.q0 = std::clamp(region_.q0 + dq, 0.0, doc_->heat.n_q - sq);
      region_.q1 = region_.q0 + sq;
      drag_x_ = m.x;
      drag_y_ = m.y;
    }
  }
}

void Canvas::note_fit(const std::string& text, float room) {
  const float need = ImGui::CalcTextSize(text.c_str()).x;
  if (need > room + 0.5f)
    building_overflows_.push_back(text + " (needs " + std::to_string(int(need)) + " px, has " +
                                  std::to_string(int(room)) + ")");
}

void Canvas::mark(const std::string& kind, const std::string& text, float x0, float y0, float x1,
                  float y1) {
  building_marks_.push_back({kind, text, x0, y0, x1, y1});
}

void Canvas::draw_summary(float x0, float y0, float x1, float y1) {
  const HeatmapDoc& h = doc_->heat;
  ImGui::SetCursorScreenPos(ImVec2(x0, y0));
  ImGui::BeginChild("##summary", ImVec2(x1 - x0, y1 - y0), false, ImGuiWindowFlags_NoBackground);
  ImGui::Text("Layer %d, all heads, vs dense", h.layer);
  // Cells as text first: number columns are as wide as their widest entry (never cut), the
  // variant column takes what is left (specs elided, whole on hover).
  struct Column {
    const char* name;
    const char* tip;
  };
  static const Column cols[] = {
      {"variant", "the variant spec"},
      {"recall", "dense attention mass inside the kept set"},
      {"out\nerr", "relative error of the attention output against dense (all heads)"},
      {"next-token\nKL",
       "KL(dense || variant) of the model's next-token distribution, the "
       "variant substituted in every layer"}};
  constexpr int kCols = 4;
  std::vector<std::array<std::string, kCols>> rows;
  for (const PanelDesc& p : h.panels)
    rows.push_back({p.title, p.measured ? format_fixed(p.recall, 3) : "...",
                    p.measured ? format_number(p.rel_error, 3) : "...",
                    p.measured && std::isfinite(p.kl) ? format_number(p.kl, 3) : "-"});
  const float pad = ImGui::GetStyle().CellPadding.x * 2;
  std::array<float, kCols> width{};
  for (int c = 1; c < kCols; ++c) {
    width[size_t(c)] = ImGui::CalcTextSize(cols[c].name).x;
    for (const auto& r : rows)
      width[size_t(c)] = std::max(width[size_t(c)], ImGui::CalcTextSize(r[size_t(c)].c_str()).x);
  }
  width[1] += ImGui::CalcTextSize(" ").x;  // the recall bar's leading space
  float numbers = 0;
  for (int c = 1; c < kCols; ++c) numbers += width[size_t(c)] + pad;
  const float em = ImGui::GetFontSize();
  const float variant_w = std::max(em * 4, ImGui::GetContentRegionAvail().x - numbers - pad);
  if (ImGui::BeginTable("##cmp", kCols,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH |
                            ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_NoHostExtendX)) {
    ImGui::TableSetupColumn(cols[0].name, ImGuiTableColumnFlags_WidthFixed, variant_w);
    for (int c = 1; c < kCols; ++c)
      ImGui::TableSetupColumn(cols[c].name, ImGuiTableColumnFlags_WidthFixed, width[size_t(c)]);
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int c = 0; c < kCols; ++c) {
      ImGui::TableSetColumnIndex(c);
      ImGui::TableHeader(cols[c].name);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", cols[c].tip);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const PanelDesc& p = h.panels[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const std::string title = fit_label(p.title, ImGui::GetContentRegionAvail().x);
      ImGui::TextUnformatted(title.c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", p.title.c_str());
      ImGui::TableNextColumn();
      if (p.measured) {
        // Recall as a bar: the share of dense attention mass the variant kept.
        const ImVec2 a = ImGui::GetCursorScreenPos();
        const float w = ImGui::GetContentRegionAvail().x, hh = ImGui::GetTextLineHeight();
        ImDrawList* dl = ImGui::GetWindowDrawList();
        dl->AddRectFilled(a, ImVec2(a.x + w, a.y + hh), IM_COL32(128, 128, 128, 50));
        dl->AddRectFilled(a, ImVec2(a.x + w * float(std::clamp(p.recall, 0.0, 1.0)), a.y + hh),
                          IM_COL32(70, 170, 120, 200));
      }
      for (int c = 1; c < kCols; ++c) {
        if (c > 1) ImGui::TableNextColumn();
        const std::string cell = (c == 1 && p.measured ? " " : "") + rows[i][size_t(c)];
        note_fit(cell, ImGui::GetContentRegionAvail().x);
        if (p.measured)
          ImGui::TextUnformatted(cell.c_str());
        else
          ImGui::TextDisabled("%s", cell.c_str());
      }
    }
    ImGui::EndTable();
  }
  ImGui::Spacing();
  ImGui::PushTextWrapPos(0);
  ImGui::TextDisabled(
      "recall: dense attention mass inside the kept set; out err: relative output error; "
      "next-token KL: the model's next-token KL with the variant in every layer (not the "
      "per-head row KL of the head grid). Orchid cells: entries the variant dropped (a colour "
      "outside the map). Red strips: mass each query row lost. Outlines: blocks the kernel "
      "computed. Wheel zooms, drag pans, double-click resets, click picks the query "
      "for the Tokens view.");
  ImGui::PopTextWrapPos();
  ImGui::EndChild();
}

void Canvas::draw_inspector() {
  if (hover_panel_ < 0 || hover_q_ < 0 || !doc_) return;
  const HeatmapDoc& h = doc_->heat;
  if (hover_gen_ != doc_->generation || hover_cached_q_ != hover_q_ ||
      hover_cached_k_ != hover_k_) {
    hover_cache_.assign(h.panels.size(), HoverInfo{});
    if (callbacks_.hover)
      for (size_t p = 0; p < h.panels.size(); ++p)
        hover_cache_[p] = callbacks_.hover(int(p), hover_q_, hover_k_);
    hover_gen_ = doc_->generation;
    hover_cached_q_ = hover_q_;
    hover_cached_k_ = hover_k_;
  }
  auto label = [](const std::vector<std::string>& v, int i) {
    return i < int(v.size()) ? clip_label(v[size_t(i)], 16) : std::string();
  };
  ImGui::BeginTooltip();
  ImGui::Text("query %d  %s", hover_q_, label(h.q_labels, hover_q_).c_str());
  ImGui::Text("key   %d  %s", hover_k_, label(h.k_labels, hover_k_).c_str());
  ImGui::TextDisabled("layer %d, head %d", h.layer, h.head);
  if (ImGui::BeginTable("##insp", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("variant");
    ImGui::TableSetupColumn("prob");
    ImGui::TableSetupColumn("dense");
    ImGui::TableSetupColumn("rank");
    ImGui::TableSetupColumn("kept");
    ImGui::TableHeadersRow();
    for (size_t p = 0; p < h.panels.size(); ++p) {
      const HoverInfo& i = hover_cache_[p];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(clip_label(h.panels[p].title, 30).c_str());
      if (!i.valid) continue;
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", i.prob);
      ImGui::TableNextColumn();
      ImGui::Text("%.4g", i.dense_prob);
      ImGui::TableNextColumn();
      if (i.rank > 0)
        ImGui::Text("%d", i.rank);
      else
        ImGui::TextDisabled("-");
      ImGui::TableNextColumn();
      if (!i.visible)
        ImGui::TextDisabled("causal");
      else if (i.kept)
        ImGui::TextColored(ImVec4(0.4f, 0.85f, 0.4f, 1), "kept");
      else
        ImGui::TextColored(ImVec4(0.95f, 0.35f, 0.35f, 1), "dropped");
    }
    ImGui::EndTable();
  }
  ImGui::EndTooltip();
}

void Canvas::draw_colorbar(float x0, float y0, float x1, float y1) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const bool diff = settings_.mode == DisplayMode::Difference;
  const ColorScale cs = scale();
  const float vmax = cs.vmax, dmax = cs.dmax;
  const Colormap cm = diff ? Colormap::Diverging : settings_.colormap;
  const int steps = 96;
  for (int i = 0; i < steps; ++i) {
    const float t = 1.f - (float(i) + 0.5f) / steps;
    const float ya = y0 + (y1 - y0) * float(i) / steps, yb = y0 + (y1 - y0) * float(i + 1) / steps;
    dl->AddRectFilled(ImVec2(x0, ya), ImVec2(x1, yb + 0.5f), colormap_u32(cm, t));
  }
  dl->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), frame_color());
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowWidth() - 8;
  auto tick = [&](float t, const std::string& s) {
    const float y = y1 - (y1 - y0) * t;
    dl->AddLine(ImVec2(x1, y), ImVec2(x1 + 4, y), text_color());
    note_fit(s, right - (x1 + 6));
    dl->AddText(ImVec2(x1 + 6, y - ImGui::GetTextLineHeight() / 2), text_color(), s.c_str());
  };
  const float lo = settings_.log_floor;
  if (diff) {
    tick(0, "-" + fmt_num(dmax));
    tick(0.5f, "0");
    tick(1, "+" + fmt_num(dmax));
  } else if (settings_.log_scale) {
    const float hi = std::max(vmax, lo * 10);
    for (double d = std::ceil(std::log10(lo)); d <= std::log10(hi) + 1e-9; d += 1)
      tick(float((d - std::log10(lo)) / (std::log10(hi) - std::log10(lo))),
           fmt_num(std::pow(10.0, d)));
  } else {
    tick(0, "0");
    tick(0.5f, fmt_num(vmax / 2));
    tick(1, fmt_num(vmax));
  }
  // The caption wraps at words inside the colour bar's column.
  const char* what = diff                                     ? "variant - dense"
                     : settings_.mode == DisplayMode::KeptSet ? "dense p (kept)"
                                                              : "probability";
  float y = y1 + 6;
  for (const std::string& line : wrap_parts(what, right - x0, " ")) {
    note_fit(line, right - x0);
    dl->AddText(ImVec2(x0, y), dim_text_color(), line.c_str());
    y += ImGui::GetTextLineHeight();
  }
  // Probabilities: cells a variant dropped have a colour of their own, outside the map.
  if (settings_.mode == DisplayMode::Probabilities && doc_ && doc_->heat.panels.size() > 1) {
    const float sw = ImGui::GetTextLineHeight() * 0.8f;
    y += 4;
    dl->AddRectFilled(ImVec2(x0, y + 1), ImVec2(x0 + sw, y + 1 + sw),
                      IM_COL32(kDroppedRgb.r, kDroppedRgb.g, kDroppedRgb.b, 255));
    dl->AddRect(ImVec2(x0, y + 1), ImVec2(x0 + sw, y + 1 + sw), frame_color());
    note_fit("dropped", right - x0 - sw - 4);
    dl->AddText(ImVec2(x0 + sw + 4, y), dim_text_color(), "dropped");
    mark("heat.legend.dropped", "dropped", x0, y, right, y + ImGui::GetTextLineHeight());
  }
}

ColorScale Canvas::scale() const {
  ColorScale c;
  c.mode = settings_.mode;
  c.colormap = settings_.colormap;
  c.log_scale = settings_.log_scale;
  c.log_floor = settings_.log_floor;
  c.vmax = c.dmax = 0;
  if (doc_)
    for (size_t p = 0; p < doc_->heat.panels.size() && p < panels_.size(); ++p)
      if (panels_[p]->has_tile) {
        c.vmax = std::max(c.vmax, panels_[p]->tile.vmax);
        c.dmax = std::max(c.dmax, panels_[p]->tile.dmax);
      }
  c.vmax = std::max(c.vmax, 1e-9f);
  c.dmax = std::max(c.dmax, 1e-9f);
  return c;
}

void Canvas::record_uploads(VkCommandBuffer cb, int slot) {
  if (!doc_) return;
  const ColorScale s = scale();
  for (size_t i = 0; i < doc_->heat.panels.size() && i < panels_.size(); ++i) {
    Panel& p = *panels_[i];
    if (!p.has_tile || (!p.dirty && p.colored == s)) continue;
    colorize(p.tile, s, p.rgba);
    const bool recreated = p.image->upload(cb, slot, p.rgba.data(), p.tile.w, p.tile.h);
    const bool fresh = !p.set;
    if (fresh) p.set = pipeline_->allocate_set();
    if (recreated || fresh) pipeline_->write_set(p.set, p.image->view());
    p.dirty = false;
    p.colored = s;
  }
}

void Canvas::record_draw(VkCommandBuffer cb, uint32_t fb_w, uint32_t fb_h) {
  if (doc_ && settings_.view == ViewKind::Heatmaps) {
    const double rq = region_.q1 - region_.q0, rk = region_.k1 - region_.k0;
    for (size_t p = 0; p < doc_->heat.panels.size() && p < panels_.size(); ++p) {
      const Panel& pan = *panels_[p];
      if (!pan.has_tile || !pan.image->has_content() || !pan.set || pan.x1 <= pan.x0) continue;
      const PanelTile& t = pan.tile;
      // Visible part of the tile's region, on screen and in the texture.
      const double k0 = std::max<double>(t.k0, region_.k0), k1 = std::min<double>(t.k1, region_.k1);
      const double q0 = std::max<double>(t.q0, region_.q0), q1 = std::min<double>(t.q1, region_.q1);
      if (k1 <= k0 || q1 <= q0) continue;
      auto px = [&](double k) { return pan.x0 + (k - region_.k0) / rk * (pan.x1 - pan.x0); };
      auto py = [&](double q) { return pan.y0 + (q - region_.q0) / rq * (pan.y1 - pan.y0); };
      const double sx = fb_scale_ / fb_w * 2, sy = fb_scale_ / fb_h * 2;
      const double cw = pan.image->capacity_w(), ch = pan.image->capacity_h();
      HeatmapPush pc{};
      pc.rect[0] = float(px(k0) * sx - 1);
      pc.rect[1] = float(py(q0) * sy - 1);
      pc.rect[2] = float(px(k1) * sx - 1);
      pc.rect[3] = float(py(q1) * sy - 1);
      pc.uv[0] = float((k0 - t.k0) / (t.k1 - t.k0) * t.w / cw);
      pc.uv[1] = float((q0 - t.q0) / (t.q1 - t.q0) * t.h / ch);
      pc.uv[2] = float((k1 - t.k0) / (t.k1 - t.k0) * t.w / cw);
      pc.uv[3] = float((q1 - t.q0) / (t.q1 - t.q0) * t.h / ch);
      pipeline_->draw(cb, pan.set, pc, fb_w, fb_h);
    }
  }
  ImGui_ImplVulkan_RenderDrawData(ImGui::GetDrawData(), cb);
}

}  // namespace attn::render
