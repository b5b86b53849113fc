#include "app/core/heads/atlas_shard.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "app/core/heads/head_roles.h"
#include "compute/error.h"

namespace attn::core {
namespace {

constexpr const char* kKind = "attnscope-atlas-shard";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

nlohmann::json numbers(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(std::isnan(x) ? nlohmann::json() : nlohmann::json(x));
  return a;
}

std::vector<double> numbers_from(const nlohmann::json& a, size_t n, const std::string& what) {
  require(a.is_array() && a.size() == n, ErrorCode::Format,
          what + " holds " + std::to_string(a.is_array() ? a.size() : 0) + " values, not " +
              std::to_string(n));
  std::vector<double> v;
  for (const auto& x : a) v.push_back(x.is_null() ? kNaN : x.get<double>());
  return v;
}

// The protocol two shards must share to be parts of one run.
std::string protocol_of(const AtlasSamples& s) {
  return s.model + ", " + std::to_string(s.n_layers) + "x" + std::to_string(s.n_heads) +
         " heads, " + std::to_string(s.windows) + " windows of " + std::to_string(s.window_tokens) +
         " (" + std::to_string(s.text_tokens) + " text tokens), " + std::to_string(s.repeats) +
         " sequences of " + std::to_string(s.repeat_length) + ", long range " +
         std::to_string(s.long_range) + ", seed " + std::to_string(s.seed);
}

}  // namespace

nlohmann::json atlas_shard_json(const AtlasShard& s) {
  using nlohmann::json;
  const AtlasSamples& a = s.atlas;
  const auto& roles = head_roles();
  json samples = json::array();
  for (const AtlasSample& smp : a.samples) {
    json scores = json::object();
    for (size_t r = 0; r < roles.size() && r < smp.scores.size(); ++r)
      if (!smp.scores[r].empty()) scores[roles[r].name] = numbers(smp.scores[r]);
    json e = {
        {"kind", smp.repeat ? "sequence" : "window"}, {"index", smp.index}, {"scores", scores}};
    if (!smp.repeat) {
      e["offsets"] = smp.offsets;
      e["nll"] = smp.nll;
      e["predicted"] = smp.predicted;
    }
    samples.push_back(e);
  }
  json j = {{"kind", kKind},
            {"version", 1},
            {"model", a.model},
            {"layers", a.n_layers},
            {"heads", a.n_heads},
            {"protocol",
             {{"text_windows", a.windows},
              {"window_tokens", a.window_tokens},
              {"text_tokens", a.text_tokens},
              {"repeated_sequences", a.repeats},
              {"repeat_length", a.repeat_length},
              {"long_range_distance", a.long_range},
              {"seed", a.seed},
              {"language_model", a.lm}}},
            {"seconds", a.seconds},
            {"samples", samples}};
  if (s.ablation) {
    const AblationSamples& b = *s.ablation;
    json windows = json::array();
    for (size_t w = 0; w < b.index.size(); ++w) {
      std::vector<double> d;
      for (const auto& head : b.delta) d.push_back(head[w]);
      windows.push_back({{"index", b.index[w]}, {"base", b.base[w]}, {"delta", numbers(d)}});
    }
    j["ablation"] = {{"mode", b.mode}, {"windows_total", b.windows}, {"windows", windows}};
  }
  return j;
}

AtlasShard atlas_shard_from_json(const nlohmann::json& j, const std::string& source) {
  require(j.is_object() && j.value("kind", "") == kKind, ErrorCode::Format,
          source + ": not a shard of `heads --shard` (kind " + kKind + ")");
  AtlasShard s;
  AtlasSamples& a = s.atlas;
  const auto& roles = head_roles();
  try {
    require(j.at("version").get<int>() == 1, ErrorCode::Format,
            source + ": version " + j.at("version").dump() + " is not supported");
    a.model = j.at("model").get<std::string>();
    a.n_layers = j.at("layers").get<int>();
    a.n_heads = j.at("heads").get<int>();
    require(a.n_layers > 0 && a.n_heads > 0 && a.n_layers * a.n_heads <= (1 << 20),
            ErrorCode::Format, source + ": bad layer or head count");
    const size_t LH = size_t(a.n_layers) * size_t(a.n_heads);
    const auto& p = j.at("protocol");
    a.windows = p.at("text_windows").get<int>();
    a.window_tokens = p.at("window_tokens").get<int>();
    a.text_tokens = p.at("text_tokens").get<int>();
    a.repeats = p.at("repeated_sequences").get<int>();
    a.repeat_length = p.at("repeat_length").get<int>();
    a.long_range = p.at("long_range_distance").get<int>();
    a.seed = p.at("seed").get<uint64_t>();
    a.lm = p.at("language_model").get<bool>();
    a.seconds = j.value("seconds", 0.0);
    for (const auto& e : j.at("samples")) {
      AtlasSample smp;
      const std::string kind = e.at("kind").get<std::string>();
      require(kind == "window" || kind == "sequence", ErrorCode::Format,
              source + ": a sample of kind '" + kind + "' (window or sequence)");
      smp.repeat = kind == "sequence";
      smp.index = e.at("index").get<int>();
      const std::string name = source + ": " + kind + " " + std::to_string(smp.index);
      require(smp.index >= 0 && smp.index < (smp.repeat ? a.repeats : a.windows), ErrorCode::Format,
              name + " is outside the protocol's count");
      smp.scores.resize(roles.size());
      for (const auto& [role, v] : e.at("scores").items())
        smp.scores[size_t(head_role_index(role))] = numbers_from(v, LH, name + " " + role);
      if (!smp.repeat) {
        smp.offsets = e.at("offsets").get<std::vector<int>>();
        require(smp.offsets.size() == LH, ErrorCode::Format, name + ": offsets are not L x H");
        smp.nll = e.at("nll").get<double>();
        smp.predicted = e.at("predicted").get<int>();
      }
      a.samples.push_back(std::move(smp));
    }
    if (j.contains("ablation")) {
      const auto& aj = j.at("ablation");
      AblationSamples b;
      b.mode = aj.at("mode").get<std::string>();
      b.n_layers = a.n_layers;
      b.n_heads = a.n_heads;
      b.windows = aj.at("windows_total").get<int>();
      b.delta.assign(LH, {});
      for (const auto& w : aj.at("windows")) {
        b.index.push_back(w.at("index").get<int>());
        b.base.push_back(w.at("base").get<double>());
        const std::vector<double> d = numbers_from(
            w.at("delta"), LH, source + ": ablation window " + std::to_string(b.index.back()));
        for (size_t i = 0; i < LH; ++i) b.delta[i].push_back(d[i]);
      }
      s.ablation = std::move(b);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::Format, source + ": " + e.what());
  } catch (const Error& e) {
    // head_role_index() names an unknown role without the file.
    if (std::string(e.what()).rfind(source, 0) == 0) throw;
    throw Error(ErrorCode::Format, source + ": " + e.what());
  }
  return s;
}

AtlasShard merge_atlas_shards(const std::vector<AtlasShard>& shards) {
  require(!shards.empty(), ErrorCode::Format, "no shards to merge");
  AtlasShard m;
  m.atlas = shards.front().atlas;
  m.atlas.samples.clear();
  m.atlas.seconds = 0;
  const std::string protocol = protocol_of(m.atlas);
  const bool ablated = shards.front().ablation.has_value();
  if (ablated) {
    m.ablation = *shards.front().ablation;
    m.ablation->index.clear();
    m.ablation->base.clear();
    for (auto& d : m.ablation->delta) d.clear();
  }
  struct Window {
    int index;
    double base;
    std::vector<double> delta;
  };
  std::vector<Window> windows;
  for (size_t i = 0; i < shards.size(); ++i) {
    const AtlasShard& s = shards[i];
    const std::string name = "shard " + std::to_string(i + 1);
    require(protocol_of(s.atlas) == protocol, ErrorCode::Format,
            name + " measured " + protocol_of(s.atlas) + ", the first " + protocol);
    m.atlas.samples.insert(m.atlas.samples.end(), s.atlas.samples.begin(), s.atlas.samples.end());
    m.atlas.seconds += s.atlas.seconds;
    require(s.ablation.has_value() == ablated, ErrorCode::Format,
            name + (ablated ? " has no" : " has an") + " ablation scan and the first shard does" +
                (ablated ? "" : " not") + ": run every shard with the same --ablate-each");
    if (!ablated) continue;
    const AblationSamples& b = *s.ablation;
    require(b.mode == m.ablation->mode && b.windows == m.ablation->windows, ErrorCode::Format,
            name + " ablated by " + b.mode + ", the first by " + m.ablation->mode);
    for (size_t w = 0; w < b.index.size(); ++w) {
      Window x{b.index[w], b.base[w], {}};
      for (const auto& d : b.delta) x.delta.push_back(d[w]);
      windows.push_back(std::move(x));
    }
  }
  auto& all = m.atlas.samples;
  std::stable_sort(all.begin(), all.end(), [](const AtlasSample& a, const AtlasSample& b) {
    return a.repeat != b.repeat ? b.repeat : a.index < b.index;
  });
  for (size_t k = 1; k < all.size(); ++k)
    require(all[k].repeat != all[k - 1].repeat || all[k].index != all[k - 1].index,
            ErrorCode::Format,
            std::string(all[k].repeat ? "sequence " : "window ") + std::to_string(all[k].index) +
                " is in two shards");
  const long n_windows =
      std::count_if(all.begin(), all.end(), [](const AtlasSample& x) { return !x.repeat; });
  require(n_windows == m.atlas.windows && long(all.size()) - n_windows == m.atlas.repeats,
          ErrorCode::Format,
          "the shards hold " + std::to_string(n_windows) + " of " +
              std::to_string(m.atlas.windows) + " windows and " +
              std::to_string(long(all.size()) - n_windows) + " of " +
              std::to_string(m.atlas.repeats) + " sequences: is a shard missing?");
  if (ablated) {
    std::stable_sort(windows.begin(), windows.end(),
                     [](const Window& a, const Window& b) { return a.index < b.index; });
    for (size_t w = 0; w < windows.size(); ++w)
      require(windows[w].index == int(w), ErrorCode::Format,
              "ablation window " + std::to_string(w) +
                  (w > 0 && windows[w].index == windows[w - 1].index
                       ? " is in two shards"
                       : " is missing: is a shard absent?"));
    require(int(windows.size()) == m.ablation->windows, ErrorCode::Format,
            "the shards ablated " + std::to_string(windows.size()) + " of " +
                std::to_string(m.ablation->windows) + " windows: is a shard missing?");
    for (const Window& x : windows) {
      m.ablation->index.push_back(x.index);
      m.ablation->base.push_back(x.base);
      for (size_t i = 0; i < x.delta.size(); ++i) m.ablation->delta[i].push_back(x.delta[i]);
    }
  }
  return m;
}

}  // namespace attn::core
