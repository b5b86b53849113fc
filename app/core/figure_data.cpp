#include "app/core/figure_data.h"

#include <filesystem>

#include "app/core/analysis.h"
#include "app/core/head_metrics.h"
#include "compute/error.h"

namespace attn::core {

const std::vector<std::string>& view_names() {
  static const std::vector<std::string> names = {"heatmap", "variants", "grid",  "sinks",
                                                 "image",   "tradeoff", "tokens"};
  return names;
}

const char* view_name(View v) {
  return view_names()[size_t(v)].c_str();
}

View view_from_name(const std::string& name) {
  const auto& n = view_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (n[i] == name) return View(i);
  std::string list;
  for (const auto& s : n) list += (list.empty() ? "" : ", ") + s;
  throw Error(ErrorCode::InvalidArgument, "unknown view '" + name + "' (known: " + list + ")");
}

namespace {

std::string model_name(const Analysis& a) {
  const Session& s = a.session;
  if (s.input.kind == "tensors" || s.input.kind == "synthetic") return a.model_summary;
  const std::string& id = s.model.id;
  return id.rfind("default-", 0) == 0 ? id : std::filesystem::path(id).filename().string();
}

// "text, 42 tokens" / "image coat_1.png, 28x28 px, 50 tokens".
std::string describe_input(const Analysis& a) {
  const Session& s = a.session;
  if (s.input.kind == "image")
    return "image " + std::filesystem::path(s.input.image).filename().string() + ", " +
           std::to_string(a.image.width) + "x" + std::to_string(a.image.height) + " px, " +
           std::to_string(a.n_tokens()) + " tokens";
  return s.input.kind + ", " + std::to_string(a.n_tokens()) + " tokens";
}

}  // namespace

FigureData collect_figure(const Analysis& a, View view, int max_cells) {
  const Session& s = a.session;
  FigureData f;
  f.view = view;
  f.settings = s.view;
  const std::string where = "layer " + std::to_string(s.layer) + ", head " + std::to_string(s.head);
  f.subtitle = model_name(a) + " \u00b7 " + describe_input(a);
  const int panels = int(a.panels.size());
  std::string title;
  switch (view) {
    case View::Heatmap:
      f.heatmaps.push_back(heatmap(a, 0, a.layer(), a.head(), max_cells));
      title = "Attention of " + where;
      break;
    case View::Variants:
      f.heatmaps = heatmaps(a, max_cells);
      title = "Attention variants on " + where;
      break;
    case View::Grid: {
      const std::string& m = s.view.grid_metric;
      const bool vs_dense = head_metrics()[size_t(head_metric_index(m))].vs_dense;
      // Every panel of the session (a metric against dense skips dense itself, which would
      // only show zeros).
      for (int v = 0; v < panels; ++v) {
        if (vs_dense && v == 0 && panels > 1) continue;
        f.grids.push_back(head_grid(a, v));
      }
      title = head_metric_title(m) + " per layer and head";
      break;
    }
    case View::Sinks:
      f.sinks = sinks(a, 0);
      title = "Attention received per token (sinks)";
      break;
    case View::Image:
      for (int v = 0; v < panels; ++v)
        f.images.push_back(image_attention(a, v, a.layer(), a.head()));
      title = "CLS attention over patches, " + where;
      break;
    case View::Tradeoff:
      f.tradeoff = tradeoff(a);
      title = "Cost vs accuracy of attention variants";
      break;
    case View::Tokens:
      for (int v = 0; v < panels; ++v)
        f.tokens.push_back(tokens(a, v, a.layer(), a.head(), s.view.query));
      title = "Attention from token \u201c" +
              f.tokens.front().labels[size_t(f.tokens.front().query)] + "\u201d, " + where;
      break;
  }
  f.title = s.view.title.empty() ? title : s.view.title;
  return f;
}

FigureData tradeoff_figure(const std::vector<TradeoffPoint>& points, const std::string& title,
                           const std::string& subtitle) {
  FigureData f;
  f.view = View::Tradeoff;
  f.tradeoff = points;
  f.title = title;
  f.subtitle = subtitle;
  return f;
}

}  // namespace attn::core
