// The app's Attribution view, from the core: a session's attribution setup (SessionAttribution)
// run on the model and input of an analysis, and the renderer's AttributionDoc filled from the
// run (render/document.h). The GUI calls these two on its job runner; it builds no request
// itself.
//
//   core::AttributionRun r = core::run_attribution(*analysis, session.attribution, &cancel);
//   render::AttributionDoc d = core::attribution_doc(r.attribution, r.agreement,
//                                                    r.faithfulness ? &*r.faithfulness : nullptr,
//                                                    analysis.get());
#pragma once
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/attribution/attribution.h"
#include "app/core/attribution/faithfulness.h"
#include "app/core/session/session.h"
#include "render/document.h"

namespace attn::core {

// One run of a setup: the methods' scores, every pair's rank agreement and, when asked, the
// deletion and insertion curves.
struct AttributionRun {
  Attribution attribution;
  std::vector<RankAgreement> agreement;      // every pair of methods, over the ranked units
  std::optional<Faithfulness> faithfulness;  // when the setup asks for curves
  double seconds = 0;                        // the whole run
};

// Runs `setup` on the analysis's model and input: the target at setup.position (text; -1 the
// last token), setup.target (-1 the top prediction) against setup.foil, the baseline, and the
// session's first variant substituted (its layers and heads, on the CPU) when
// setup.with_variant. The plain model runs: the session's ablation does not apply. Throws
// Error(InvalidArgument) with a message for the user (no model, no method, a baseline the input
// cannot take, a target out of range, a gradient method with a variant that refuses it, ...) and
// Error(Cancelled) when *cancel turns true.
AttributionRun run_attribution(const Analysis& a, const SessionAttribution& setup,
                               const std::atomic<bool>* cancel = nullptr, int top_k = 5);

// The view's document of a run. `a`, the analysis the run came from (optional), gives the
// tokens' display labels and word boundaries, and the image as the model sees it.
render::AttributionDoc attribution_doc(const Attribution& at,
                                       const std::vector<RankAgreement>& agreement,
                                       const Faithfulness* f, const Analysis* a = nullptr);
render::AttributionDoc attribution_doc(const AttributionRun& r, const Analysis* a = nullptr);

// A target or foil id as the user reads it: "' the'" (text models), the class name (image
// classifiers); "" when the analysis has no model or `id` is out of range.
std::string attribution_target_name(const Analysis& a, int id);
// The id of a target or foil written as text: one token (text models, e.g. " the"), or a class
// name or index (image classifiers). Throws Error(InvalidArgument) naming what it is not.
int attribution_target_id(const Analysis& a, const std::string& text);
// Largest target id + 1: the vocabulary (text) or the classes (images); 0 without a model.
int attribution_target_count(const Analysis& a);
// The baselines the analysis's input takes, in menu order: text "zero", "token"; images
// "zero", "mean"; none without a model.
std::vector<std::string> attribution_baselines(const Analysis& a);

// Why a run on `ran_on` no longer describes the analysis `now` (another model or input, or, with
// the variant, another first variant), or "" when it still does.
std::string attribution_stale(const Analysis& ran_on, const Analysis& now, bool with_variant);

}  // namespace attn::core
