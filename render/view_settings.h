// How the views are shown: what the toolbar and the host's menus change.
#pragma once
#include <utility>
#include <vector>

#include "render/colormap.h"

namespace attn::render {

enum class ViewKind {
  Heatmaps,
  HeadGrid,
  Sinks,
  Tokens,
  Image,
  Tradeoff,
  Attribution,
  Qk,
  Steps
};
constexpr int kViewCount = 9;
const char* view_name(ViewKind v);

enum class DisplayMode { Probabilities = 0, KeptSet = 1, Difference = 2 };

struct DisplaySettings {
  ViewKind view = ViewKind::Heatmaps;
  DisplayMode mode = DisplayMode::Probabilities;
  Colormap colormap = Colormap::Viridis;
  bool log_scale = true;
  float log_floor = 1e-4f;       // smallest probability the log scale shows
  bool outlines = true;          // kept blocks outlined
  int grid_metric = 0;           // index into HeadGridDoc::metrics
  int grid_variant = -1;         // index into HeadGridDoc::variants (-1: the document's choice)
  bool grid_unit_scale = false;  // [0, 1] colour scale for metrics whose values lie there
  int query = -1;                // tokens view: the selected query (-1: the last token)
  int image_mode = 1;            // 0: per head, 1: mean over heads, 2: rollout
  int tradeoff_x = 0;            // 0: density, 1: time
  int tradeoff_y = 0;            // 0: output error, 1: mass recall, 2: next-token KL
  int attribution_layout = 0;    // text: 0 auto (chips when every method fits), 1 token chips,
                                 // 2 compact cells (long inputs)
  bool dark = true;
  bool presentation = false;  // large fonts
  // What the lesson step shown points at (app/core/teaching/lesson.h), 0-based in the input:
  // the heatmaps outline the cells and mark the tokens on their axes, the tokens view marks the
  // tokens. Empty when no lesson step with highlights is shown; out-of-range entries are skipped.
  std::vector<int> highlight_tokens;
  std::vector<std::pair<int, int>> highlight_cells;  // (query, key)
};

// The colour of lesson highlights: magenta, apart from every colour map's hues and the orange of
// the selected query and the sinks.
constexpr unsigned kHighlightColor = 0xFFC828FFu;  // IM_COL32(255, 40, 200, 255), ABGR

}  // namespace attn::render
