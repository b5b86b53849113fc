// The app's Q/K map view, from the core: the query-key joint embedding
// (app/core/attribution/qk_embedding.h) of one head, run on the model and input of an analysis,
// and the renderer's QkDoc filled from it (render/document.h). The GUI calls these on its job
// runner; it builds no request itself.
//
//   core::QkRun r = core::run_qk(*analysis, session.layer, session.head, "pca");
//   render::QkDoc d = core::qk_doc(r, analysis.get());
#pragma once
#include <atomic>
#include <string>

#include "app/core/analysis/analysis.h"
#include "app/core/attribution/qk_embedding.h"
#include "render/document.h"

namespace attn::core {

struct QkRun {
  QkEmbedding embedding;
  double seconds = 0;
};

// The map of (layer, head) on the analysis's model and input, projected with `method` (pca |
// tsne). The plain model runs: the session's ablation and variants do not apply. Throws
// Error(InvalidArgument) with a message for the user (no model, a layer or head out of range, an
// unknown method, an input with more tokens than the map takes).
QkRun run_qk(const Analysis& a, int layer, int head, const std::string& method,
             const std::atomic<bool>* cancel = nullptr);

// The view's document of a run; `a`, the analysis it came from (optional), gives the tokens'
// display labels. `serial` tells the view a new map arrived (a picked query is dropped).
render::QkDoc qk_doc(const QkRun& r, const Analysis* a = nullptr, uint64_t serial = 0);

// Why a map made on `ran_on` for (layer, head) no longer describes `now` at its selected head
// (another model, input, or head), or "" when it still does.
std::string qk_stale(const Analysis& ran_on, int layer, int head, const Analysis& now);

}  // namespace attn::core
