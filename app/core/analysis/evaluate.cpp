#include "app/core/analysis/evaluate.h"

#include <algorithm>
#include <cmath>

#include "app/core/session/labels.h"
#include "compute/error.h"
#include "compute/registry.h"

namespace attn::core {

TradeoffPoint evaluate(const Analysis& a, const std::string& spec, bool end_to_end,
                       const Options& o, const std::string& backend) {
  require(!a.panels.empty() && a.panels[0].ran(), ErrorCode::InvalidArgument,
          "evaluate: the analysis has no dense reference yet");
  Analysis b = a;  // shares the problems and the dense results
  b.panels.resize(1);
  Panel p;
  p.variant = std::make_shared<const Variant>(make_variant(spec));
  p.spec = p.variant->spec();
  p.backend = backend.empty() ? a.session.backend : backend;
  b.panels.push_back(std::move(p));  // the dense panel keeps its comparisons, if it has them
  Options fast = o;
  fast.head_grid = false;
  fast.progress = nullptr;
  auto c = run_variants(b, fast);
  c = add_metrics(*c, fast);
  if (end_to_end) c = add_end_to_end(*c, fast);
  return tradeoff_point(*c, 1);
}

std::vector<std::string> auto_sweep_specs(const Analysis& a, int points) {
  std::vector<std::string> out;
  if (a.n_layers() == 0 || points < 2) return out;
  const int n = a.problem(a.layer()).n_k;
  for (size_t v = 1; v < a.panels.size(); ++v) {
    const std::string id = spec_pattern_id(a.panels[v].spec);
    if (id == "dense") continue;
    const PieceInfo& piece = registry_piece(id);
    if (piece.info.params.empty()) continue;
    const ParamSpec& ps = piece.info.params[0];
    for (int i = 0; i < points; ++i) {
      double x;
      if (ps.type == ParamSpec::Type::Int && ps.min >= 1) {
        const double lo = std::max(1.0, ps.min), hi = std::min(ps.max, std::max(lo, double(n)));
        x = std::round(lo * std::pow(hi / lo, i / double(points - 1)));
      } else {
        x = ps.min + (ps.max - ps.min) * i / double(points - 1);
      }
      Params params;
      params[ps.name] = x;
      try {
        const std::string s = make_variant(id, params).spec();
        if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
      } catch (const Error&) {  // a setting this problem cannot take: not a point
      }
    }
  }
  return out;
}

}  // namespace attn::core
