// The renderer's entry point: every view of attnscope drawn with Vulkan (heatmap quads) and Dear
// ImGui (axes, labels, overlays, the hover inspector) into a render pass the host owns.
//
//   Canvas c(target);                      // once the device and render pass exist
//   c.set_document(doc);                   // when the analysis changes
//   c.set_tiles(doc->generation, tiles);   // when pooled cells for the visible region arrive
//   each frame: c.build_frame(input); [host: command buffer] c.record_uploads(cb, slot);
//               [host: begin render pass] c.record_draw(cb, w, h); [host: end render pass]
//
// The host asks wanted_tiles() what region and resolution to compute next.
#pragma once
#include <vulkan/vulkan.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "render/cell_colors.h"
#include "render/device.h"
#include "render/document.h"
#include "render/view_settings.h"

namespace attn::render {

class HeatmapPipeline;
class SampledImage;
class ImGuiLayer;
struct TradeoffPlot;     // render/tradeoff_view.cpp
struct TradeoffLabel;    // render/tradeoff_view.cpp
struct SinksLayout;      // render/sinks_view.cpp
struct HeatFrame;        // render/canvas.cpp
struct AttributionRows;  // render/attribution_view.cpp
struct AttributionGrid;  // render/attribution_view.cpp

struct FrameInput {
  float width = 0, height = 0;               // logical pixels
  float dpr = 1;                             // device pixels per logical pixel
  float dt = 1.f / 60;                       // seconds since the last frame
  float mouse_x = -1e30f, mouse_y = -1e30f;  // logical pixels; far away when outside
  bool mouse_down[3] = {false, false, false};
  float wheel = 0;              // notches, positive = away from the user
  std::vector<unsigned> chars;  // typed characters (UTF-32)
  bool ctrl = false, shift = false;
};

struct Callbacks {
  std::function<HoverInfo(int panel, int q, int k)> hover;
  // Probabilities of query q over every key, for the token view.
  std::function<std::vector<float>(int panel, int q)> row;
  std::function<void(int layer, int head)> select_head;
};

// The region and resolution the heatmap panels want next; `serial` changes with any of it.
struct TileWant {
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0;
  int w = 0, h = 0;
  uint64_t serial = 0;
};

struct FontSpec {
  std::string path;  // a TTF file (e.g. DejaVu Sans); empty or missing = ImGui's built-in font
  float size = 15, presentation_size = 24;
};

class Canvas {
 public:
  explicit Canvas(const RenderTarget& target, const FontSpec& fonts = {});
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  void set_document(std::shared_ptr<const Document> doc);
  // Tiles for panels 0..n-1 of the document of `generation` (ignored for another generation).
  void set_tiles(uint64_t generation, std::vector<PanelTile> tiles);
  void set_callbacks(Callbacks cb) { callbacks_ = std::move(cb); }
  DisplaySettings& settings() { return settings_; }

  void build_frame(const FrameInput& in);
  void record_uploads(VkCommandBuffer cb, int slot);
  void record_draw(VkCommandBuffer cb, uint32_t fb_w, uint32_t fb_h);

  TileWant wanted_tiles() const { return want_; }
  // The clear colour that matches the theme (RGBA 0..1).
  void clear_color(float out[4]) const;
  // True while something animates or the mouse interacts (the host should schedule a frame).
  bool wants_redraw() const { return redraw_frames_ > 0; }
  int frames() const { return frames_; }
  // Resets zoom to the whole matrix.
  void reset_view();
  // Screen rectangles (logical px: x0, y0, x1, y1) of the heatmap panels drawn last frame.
  std::vector<std::array<float, 4>> panel_rects() const;

  // Texts drawn last frame with less room than they need ("text (needs N px, has M)"): numbers and
  // statistics are laid out never to be cut, so this stays empty (a layout check for tests).
  const std::vector<std::string>& text_overflows() const { return overflows_; }

  // Where a view put a text or box last frame, in logical px ("sinks.labels", "tradeoff.label",
  // "image.head_label", ...): what layout tests check, like text_overflows().
  struct Mark {
    std::string kind, text;
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  };
  const std::vector<Mark>& marks() const { return marks_; }
  // The head grid's colour scale as last drawn.
  const ValueRange& grid_range() const { return grid_range_; }

  struct Region {
    double q0 = 0, q1 = 0, k0 = 0, k1 = 0;
  };

 private:
  struct Panel;
  void build_toolbar();
  void build_heatmaps(float x0, float y0, float x1, float y1);
  // Axis labels at `row_scale` / `col_scale` of the font (0: index ticks instead).
  void draw_heat_panel(int p, float x0, float y0, float x1, float y1, float row_scale,
                       float col_scale);
  // The panel's parts: the query and key axes (labels or index ticks), the kept blocks'
  // outlines, the strip of dense mass lost per row.
  void draw_heat_row_axis(int p, const HeatFrame& f, float row_scale);
  void draw_heat_col_axis(int p, const HeatFrame& f, float col_scale);
  void draw_kept_blocks(const PanelDesc& d, const HeatFrame& f);
  void draw_lost_mass(const PanelDesc& d, const PanelTile& t, const HeatFrame& f);
  void handle_heat_input(float x0, float y0, float x1, float y1);
  void draw_inspector();
  void draw_summary(float x0, float y0, float x1, float y1);
  void draw_colorbar(float x0, float y0, float x1, float y1);
  void build_head_grid(float x0, float y0, float x1, float y1);
  void build_sinks(float x0, float y0, float x1, float y1);
  // The sinks view's parts (render/sinks_view.cpp): one strip of bars per layer, the token labels
  // under the bars, the hovered position's box.
  void draw_sinks_strip(const SinksLayout& g, const std::vector<float>& vals, float top,
                        const char* title, bool log);
  void draw_sinks_labels(const SinksLayout& g, float bars_bottom, float labels_top,
                         uint32_t hover_col);
  void draw_sinks_hover(const SinksLayout& g, float top1, float bars_bottom, float labels_top);
  void build_tokens(float x0, float y0, float x1, float y1);
  void build_image(float x0, float y0, float x1, float y1);
  void build_tradeoff(float x0, float y0, float x1, float y1);
  // The attribution view (render/attribution_view.cpp): the header (title, reading hint, colour
  // key; returns its bottom edge), the plan and drawing of one row of token chips per method (or
  // of the image small multiples) in `room` pixels of height, the hover's table of every method;
  // its lower half (attribution_charts.cpp): the agreement triangle (its cell size and width for
  // a height) and the faithfulness curves.
  void build_attribution(float x0, float y0, float x1, float y1);
  float draw_attribution_header(float x0, float y0, float x1);
  AttributionRows plan_attribution_rows(float x0, float x1, float room);
  void draw_attribution_rows(const AttributionRows& r, float x0, float y0, float x1, float y1);
  AttributionGrid plan_attribution_images(float x0, float x1, float room);
  void draw_attribution_images(const AttributionGrid& g, float x0, float y0);
  void attribution_tooltip(int method, int unit);
  float attribution_matrix_cell(float h);
  float attribution_matrix_width(float h);
  void draw_attribution_matrix(float x0, float y0, float x1, float y1);
  void draw_attribution_curves(float x0, float y0, float x1, float y1);
  // The query-key map (render/qk_view.cpp): the header (title, reading hint; returns its bottom
  // edge), the square scatter with its position colour bar, the picked query's attention row
  // (lines to its keys) and the list of its top keys.
  void build_qk(float x0, float y0, float x1, float y1);
  float draw_qk_header(float x0, float y0, float x1);
  void draw_qk_colorbar(float x0, float y0, float x1, float y1);
  void draw_qk_top_keys(float x0, float y0, float x1, float y1);
  // The step-through of one head (render/steps_view.cpp): the stages as labelled matrices with
  // hover provenance and a followed entry; the panel that spells the followed entry out.
  void build_steps(float x0, float y0, float x1, float y1);
  void draw_steps_follow(float x0, float y0, float x1, float y1);
  // The trade-off view's parts (render/tradeoff_view.cpp), in drawing order: the axis choice
  // (returns its bottom edge), the legend (which places the plot frame), the axes, the front and
  // points, the labels.
  float build_tradeoff_axis_choice(float x0, float y0);
  void place_tradeoff_legend(TradeoffPlot& plot, float x0, float x1, float y1,
                             float controls_bottom);
  void draw_tradeoff_axes(TradeoffPlot& plot, float x0);
  void draw_tradeoff_points(const TradeoffPlot& plot, std::vector<const TradeoffMark*>& pts,
                            std::vector<const TradeoffMark*>& shown);
  std::vector<TradeoffLabel> place_tradeoff_labels(const TradeoffPlot& plot,
                                                   const std::vector<const TradeoffMark*>& shown,
                                                   const std::vector<int>& cluster);
  void update_want();
  // Records `text` in overflows_ when it is wider than `room` pixels.
  void note_fit(const std::string& text, float room);
  // Records a text or box of this frame for marks().
  void mark(const std::string& kind, const std::string& text, float x0, float y0, float x1,
            float y1);
  // Whether token `t` is one the lesson step highlights (settings_.highlight_tokens).
  bool highlighted(int t) const {
    return std::find(settings_.highlight_tokens.begin(), settings_.highlight_tokens.end(), t) !=
           settings_.highlight_tokens.end();
  }
  // The colour scale shared by the panels this frame (ranges over every panel's tile).
  ColorScale scale() const;

  RenderTarget target_;
  std::unique_ptr<ImGuiLayer> imgui_;
  std::unique_ptr<HeatmapPipeline> pipeline_;
  std::vector<std::unique_ptr<Panel>> panels_;
  std::shared_ptr<const Document> doc_;
  DisplaySettings settings_;
  Callbacks callbacks_;
  Region region_;
  TileWant want_;
  float heat_px_w_ = 0, heat_px_h_ = 0;  // size of one panel's heatmap area
  float fb_scale_ = 1, width_ = 0, height_ = 0;
  int hover_panel_ = -1, hover_q_ = -1, hover_k_ = -1;
  bool dragging_ = false;
  float drag_x_ = 0, drag_y_ = 0, press_x_ = 0, press_y_ = 0;
  std::vector<std::string> overflows_, building_overflows_;
  std::vector<Mark> marks_, building_marks_;
  // Widest heatmap axis label of doc_ (as drawn: 10 characters at most), at font size label_font_.
  const Document* label_doc_ = nullptr;
  uint64_t label_gen_ = ~0ull;
  float label_font_ = 0, label_w_q_ = 0, label_w_k_ = 0;
  ValueRange grid_range_;
  int redraw_frames_ = 2;
  int frames_ = 0;
  // Hover cache: (generation, q, k) -> per panel.
  uint64_t hover_gen_ = ~0ull;
  int hover_cached_q_ = -1, hover_cached_k_ = -1;
  std::vector<HoverInfo> hover_cache_;
  // Token view cache: (generation, q) -> per panel rows.
  uint64_t row_gen_ = ~0ull;
  int row_q_ = -1;
  std::vector<std::vector<float>> row_cache_;
  // Attribution view: the method and unit under the mouse this frame (-1: none; method -1 on
  // an image's input panel).
  int attr_hover_method_ = -1, attr_hover_unit_ = -1;
  // Q/K map: the point under the mouse this frame (-1: none), the picked query's position (-1:
  // none) and the map it was picked in.
  int qk_hover_ = -1, qk_query_ = -1;
  uint64_t qk_serial_ = 0;
  // Step-through: the stage under the mouse this frame (-1: none), the followed query and key
  // (-1: none) and the head and input length they were picked in.
  int steps_hover_stage_ = -1, steps_q_ = -1, steps_k_ = -1;
  int steps_layer_ = -1, steps_head_ = -1, steps_n_ = -1;
};

}  // namespace attn::render
