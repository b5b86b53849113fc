// The whole analysis as JSON (`attnscope analyze --json`): model, input, the dense reference's
// sinks and residual statistics, every variant's per-layer and per-head metrics (every
// head-grid metric included), end-to-end figures, the heatmap cells of the selected head and
// the trade-off points. NaN and Inf are written as null.
#pragma once
#include <nlohmann/json.hpp>

#include "app/core/analysis/analysis.h"

namespace attn::core {

// `max_cells` bounds the heatmap cells per side (as the figures' --max-cells).
nlohmann::json analysis_json(const Analysis& a, int max_cells = 512);

}  // namespace attn::core
