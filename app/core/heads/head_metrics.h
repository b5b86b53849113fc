// Per-head metrics: one table, read by the head grid of the app, `attnscope analyze --json` and
// the `grid` figure. Adding a metric is one entry here.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/core/heads/head_roles.h"
#include "compute/metrics.h"
#include "compute/probabilities.h"

namespace attn::core {

// What a metric sees of one head: the layer's problem and the panel's result (all heads), the
// head, and the head's comparison with dense.
struct HeadMetricInput {
  const Variant& variant;
  const Problem& problem;
  const Result& result;
  int head = 0;
  const Metrics& metrics;  // compare() of this head alone against dense
  // The head's role scores (head_roles.h) on this input; null where per-head metrics were
  // skipped (the role metrics are then NaN).
  const RoleScores* roles = nullptr;
  // The previous-token mass where the caller read it off the head's rows (panel_head());
  // computed from the problem when empty.
  std::optional<double> previous_token = std::nullopt;
};

struct HeadMetric {
  std::string name;        // stable id used in sessions and JSON: "prev_token"
  std::string title;       // colour-bar and axis title
  std::string label;       // a word or two, for choosers
  std::string definition;  // one line: what the number is, and its source
  bool vs_dense = false;   // only meaningful for a variant against dense (0 / 1 on dense)
  bool unit = false;       // values lie in [0, 1]: a fixed [0, 1] colour scale is offered
  std::function<double(const HeadMetricInput&)> value;
};

// Every metric, in display order.
const std::vector<HeadMetric>& head_metrics();
// Index in head_metrics() of a name or a deprecated alias; throws Error(InvalidArgument) listing
// the names.
int head_metric_index(const std::string& name);
// Deprecated names still read (sessions, --figure-metric, JSON keys): {old, current}.
// "sink_mass" is "max_token_mass" (the word "sink" now names only kSinkRule's count).
const std::vector<std::pair<std::string, std::string>>& head_metric_aliases();
// The current name of `name` (itself when it is no alias).
std::string canonical_head_metric(const std::string& name);
// Role scores of head `head` of a panel on this input (head_roles.h), from its probabilities,
// outputs and values; `ids` (may be null) are the input's token ids.
RoleScores panel_role_scores(const Variant& v, const Problem& p, const Result& r, int head,
                             const std::vector<int32_t>* ids);
// A head of a panel from one pass over its rows (each block of probabilities computed once):
// compare() of the head alone against dense, its role scores, and the previous-token mass.
struct PanelHead {
  Metrics metrics;
  RoleScores roles;
  double previous_token = 0;
};
// Empty where the panel's rows take the general path (modifiers, another normaliser, an
// approximation, or a precision other than the reference's): compare() and panel_role_scores()
// then. `ref` is the dense result of the same problem; `scratch`, when given, holds the row
// blocks (its buffers serve again from call to call).
std::optional<PanelHead> panel_head(const Variant& v, const Problem& p, const Result& var,
                                    const Result& ref, int head, const std::vector<int32_t>* ids,
                                    SoftmaxRows* scratch = nullptr);
const std::vector<std::string>& head_metric_names();
std::string head_metric_title(const std::string& name);
// Every metric's name and definition (then the deprecated aliases), for the verbs' --help.
std::string head_metric_help();

}  // namespace attn::core
