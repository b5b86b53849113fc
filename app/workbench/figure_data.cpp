#include "app/workbench/figure_data.h"

#include <filesystem>

#include "app/workbench/workbench.h"
#include "compute/error.h"

namespace attn {

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
std::string model_name(const Workbench& wb) {
  const std::string& id = wb.session().model.id;
  return id.rfind("default-", 0) == 0 ? id : std::filesystem::path(id).filename().string();
}
}  // namespace

FigureData collect_figure(Workbench& wb, View view, int max_cells) {
  const Session& s = wb.session();
  FigureData f;
  f.view = view;
  f.settings = s.view;
  const std::string where = "layer " + std::to_string(s.layer) + ", head " + std::to_string(s.head);
  f.subtitle = model_name(wb) + " \u00b7 " + wb.describe_input();
  std::vector<std::string> specs = {"dense"};
  specs.insert(specs.end(), s.variants.begin(), s.variants.end());
  std::string title;
  switch (view) {
    case View::Heatmap:
      f.heatmaps.push_back(wb.heatmap("dense", s.layer, s.head, max_cells));
      title = "Attention of " + where;
      break;
    case View::Variants:
      f.heatmaps = wb.heatmaps(max_cells);
      title = "Attention variants on " + where;
      break;
    case View::Grid: {
      const std::string& m = s.view.grid_metric;
      const bool vs_dense = m == "output_error" || m == "mass_recall";
      for (const std::string& spec : specs) {
        if (vs_dense && spec == "dense" && specs.size() > 1) continue;
        f.grids.push_back(wb.head_grid(spec));
        if (f.grids.size() == 4) break;
      }
      f.grids.front().metric(m);  // names a bad metric
      title = head_grid_metric_title(m) + " per layer and head";
      break;
    }
    case View::Sinks:
      f.sinks = wb.sinks("dense");
      title = "Attention received per token (sinks)";
      break;
    case View::Image:
      for (const std::string& spec : specs)
        f.images.push_back(wb.image_attention(spec, s.layer, s.head));
      title = "CLS attention over patches, " + where;
      break;
    case View::Tradeoff:
      f.tradeoff = wb.tradeoff(true);
      title = "Cost vs accuracy of attention variants";
      break;
    case View::Tokens:
      for (const std::string& spec : specs)
        f.tokens.push_back(wb.tokens(spec, s.layer, s.head, s.view.query));
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

}  // namespace attn
