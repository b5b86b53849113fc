#include "app/core/export/figure_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "app/core/analysis/analysis.h"
#include "app/core/decode/stream.h"
#include "app/core/heads/head_atlas.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/heads/head_roles.h"
#include "compute/error.h"

namespace attn::core {

const std::vector<std::string>& view_names() {
  static const std::vector<std::string> names = {"heatmap", "variants", "grid",   "sinks",
                                                 "image",   "tradeoff", "tokens", "stream",
                                                 "cache",   "heads",    "patch",  "decode",
                                                 "attribution", "qk", "steps"};
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
  if (!s.ablation.empty()) {  // a figure of an ablated model says so
    std::string heads;
    for (const std::string& h : s.ablation.heads) heads += (heads.empty() ? "" : ", ") + h;
    f.subtitle += " \u00b7 " + heads + " " + s.ablation.mode + "-ablated";
  }
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
    case View::Stream:
    case View::Cache:
    case View::Decode:
      throw Error(ErrorCode::InvalidArgument,
                  std::string("the ") + view_name(view) +
                      " view comes from a stream run (`attnscope stream --figure/--timeline`) or a "
                      "decode trace (`attnscope generate --figure`), "
                      "not from an analysis");
    case View::Attribution:
    case View::Qk:
    case View::Steps:
      throw Error(ErrorCode::InvalidArgument,
                  std::string("the ") + view_name(view) + " view comes from `attnscope " +
                      (view == View::Qk      ? "qk"
                       : view == View::Steps ? "explain-head"
                                             : "attribute") +
                      " --figure`, not from an analysis");
    case View::Heads:
    case View::Patch:
      throw Error(ErrorCode::InvalidArgument, std::string("the ") + view_name(view) +
                                                  " view comes from `attnscope " + view_name(view) +
                                                  " --figure`, not from an analysis");
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

FigureData steps_figure(const HeadSteps& s, const std::string& model, int query) {
  FigureData f;
  f.view = View::Steps;
  f.steps.steps = s;
  f.title = "What head " + std::to_string(s.head) + " of layer " + std::to_string(s.layer) +
            " computes, step by step";
  f.subtitle = model + " \u00b7 " + s.variant + " \u00b7 " + std::to_string(s.n) +
               " tokens \u00b7 d = " + std::to_string(s.d) + ", hidden " +
               std::to_string(s.hidden);
  if (query >= 0 && query < s.n) {
    f.steps.query = query;
    // Its key: the one it weighs most.
    const StepStage& w = s.stage("weights");
    int best = 0;
    for (int j = 1; j < w.cols; ++j)
      if (w.at(query, j) > w.at(query, best)) best = j;
    f.steps.key = best;
  }
  return f;
}

FigureData stream_figure(const StreamResult& r, int smooth) {
  FigureData f;
  f.view = View::Stream;
  const int T = int(r.ids.size());
  f.stream.smooth = smooth > 0 ? smooth : std::max(32, T / 20);
  f.stream.context = r.context;
  for (const PolicyRun& p : r.runs) {
    StreamCurve c;
    c.spec = p.spec;
    c.perplexity = p.nll.empty() ? NAN : p.perplexity();
    double bytes = 0;
    for (double b : p.bytes) bytes += b;
    c.mean_bytes = p.bytes.empty() ? 0 : bytes / double(p.bytes.size());
    c.stopped = p.error;
    c.read = p.tokens;
    // Until `smooth` tokens are read a point averages every token so far, so a short run (a
    // full cache that stopped at the context) still has its curve.
    const int n = int(p.nll.size()), w = f.stream.smooth;
    const int every = std::max(1, n / 600);
    double window_sum = 0;
    for (int t = 0; t < n; ++t) {
      window_sum += p.nll[size_t(t)];
      if (t >= w) window_sum -= p.nll[size_t(t - w)];
      if (t % every != 0 && t + 1 != n) continue;
      c.tokens.push_back(double(t + 2));  // nll row t scores token t + 1: t + 2 tokens read
      c.ppl.push_back(std::exp(window_sum / std::min(t + 1, w)));
    }
    f.stream.curves.push_back(std::move(c));
  }
  f.title = "Perplexity while streaming, by KV-cache policy";
  f.subtitle = r.model + " \u00b7 " + std::to_string(T) + " tokens, prefill " +
               std::to_string(r.prefill) +
               (r.context > 0 ? " \u00b7 context " + std::to_string(r.context) : "");
  return f;
}

FigureData cache_figure(const StreamResult& r, int layer, int head, int max_cells) {
  FigureData f;
  f.view = View::Cache;
  f.cache.layer = layer;
  f.cache.head = head;
  const int T = int(r.ids.size());
  for (const PolicyRun& p : r.runs) {
    require(!p.history.empty(), ErrorCode::InvalidArgument,
            "the stream kept no cache records (StreamOptions::record_cache)");
    const auto& first = p.history.front().kept;
    require(layer >= 0 && layer < int(first.size()), ErrorCode::InvalidArgument,
            "layer " + std::to_string(layer) + " is outside the model's " +
                std::to_string(first.size()) + " layers");
    require(head >= 0 && head < int(first[0].size()), ErrorCode::InvalidArgument,
            "KV head " + std::to_string(head) + " is outside the model's " +
                std::to_string(first[0].size()) + " KV heads");
    CacheTimeline c;
    c.spec = p.spec;
    c.passes = int(p.history.size());
    c.tokens = T;
    c.rows = std::min(c.passes, max_cells);
    c.cols = std::min(T, max_cells);
    std::vector<double> held(size_t(c.rows) * c.cols, 0.0), seen(held.size(), 0.0);
    std::vector<char> in(static_cast<size_t>(T));
    // Per token: the first pass that held it, and whether every pass since did.
    std::vector<int> first_held(size_t(T), -1);
    std::vector<char> always(size_t(T), 1);
    for (int s = 0; s < c.passes; ++s) {
      const models::KvSnapshot& snap = p.history[size_t(s)];
      std::fill(in.begin(), in.end(), 0);
      for (int32_t t : snap.kept[size_t(layer)][size_t(head)]) in[size_t(t)] = 1;
      for (int t = 0; t <= snap.step && t < T; ++t) {
        if (in[size_t(t)] && first_held[size_t(t)] < 0) first_held[size_t(t)] = s;
        if (!in[size_t(t)] && first_held[size_t(t)] >= 0) always[size_t(t)] = 0;
      }
      const int row = int(int64_t(s) * c.rows / c.passes);
      for (int t = 0; t <= snap.step && t < T; ++t) {
        const size_t cell = size_t(row) * c.cols + size_t(int64_t(t) * c.cols / T);
        seen[cell] += 1;
        held[cell] += in[size_t(t)];
      }
    }
    c.kept.resize(held.size());
    for (size_t i = 0; i < held.size(); ++i)
      c.kept[i] = seen[i] > 0 ? float(held[i] / seen[i]) : NAN;
    // Only where the policy evicts: under a full cache every token persists.
    const bool evicts = std::find(always.begin(), always.end(), 0) != always.end();
    for (int t = 0; evicts && t < T && c.persistent.size() < 64; ++t)
      if (first_held[size_t(t)] >= 0 && always[size_t(t)] &&
          2 * (c.passes - first_held[size_t(t)]) >= c.passes)
        c.persistent.push_back(t);
    f.cache.panels.push_back(std::move(c));
  }
  f.title = "What the KV cache holds, step by step";
  f.subtitle = r.model + " \u00b7 layer " + std::to_string(layer) + ", KV head " +
               std::to_string(head) + " \u00b7 " + std::to_string(T) + " tokens";
  return f;
}

FigureData atlas_figure(const HeadAtlas& a, const std::vector<std::string>& roles) {
  FigureData f;
  f.view = View::Heads;
  f.values.scale_title = "Score";
  const auto& all = head_roles();
  for (size_t r = 0; r < all.size(); ++r) {
    if (!roles.empty() && std::find(roles.begin(), roles.end(), all[r].name) == roles.end())
      continue;
    ValueGrid g;
    g.caption = all[r].title;
    g.rows = a.n_layers;
    g.cols = a.n_heads;
    g.values = a.mean[r];
    if (a.bootstrap > 1) {
      g.lo = a.lo[r];
      g.hi = a.hi[r];
    }
    f.values.panels.push_back(std::move(g));
  }
  for (const std::string& r : roles) head_role_index(r);  // names a role that does not exist
  f.title = "Head roles per layer and head";
  std::string sub = a.model;
  if (a.windows > 0)
    sub += " \u00b7 " + std::to_string(a.windows) + " text windows of " +
           std::to_string(a.window_tokens) + " tokens";
  if (a.repeats > 0)
    sub += " \u00b7 " + std::to_string(a.repeats) + " repeated sequences of " +
           std::to_string(a.repeat_length);
  f.subtitle = sub;
  return f;
}

}  // namespace attn::core
