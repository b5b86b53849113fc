// Trade-off points of variants that are not panels of an analysis: parameter sweeps, run by the
// same stages as the panels so that a sweep point and a panel of the same spec agree.
#pragma once
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/views.h"

namespace attn::core {

// `spec` on every layer of `a`'s input on `backend` ("" = the session's), compared with the
// dense reference, and substituted into the model when `end_to_end`. Throws attn::Error for a
// bad spec or a setting the problem cannot take.
TradeoffPoint evaluate(const Analysis& a, const std::string& spec, bool end_to_end,
                       const Options& o = {}, const std::string& backend = "");

// The app's automatic sweep: each variant's first parameter over its range (geometric for
// counts), `points` settings each, as specs.
std::vector<std::string> auto_sweep_specs(const Analysis& a, int points);

}  // namespace attn::core
