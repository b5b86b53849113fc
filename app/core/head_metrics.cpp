#include "app/core/head_metrics.h"

#include <algorithm>
#include <cmath>

#include "compute/error.h"
#include "compute/probabilities.h"

namespace attn::core {
namespace {

double mean(const std::vector<float>& v) {
  if (v.empty()) return std::nan("");
  double s = 0;
  for (float x : v) s += x;
  return s / double(v.size());
}

// Mean over queries of the probability on the token just before the query (Olsson et al.
// 2022, "In-context Learning and Induction Heads": previous-token heads; TransformerLens's
// previous-token detector). O(d) per query: one entry of each row.
double previous_token(const HeadMetricInput& in) {
  const Problem& p = in.problem;
  const int offset = p.n_k - p.n_q;  // key position of query i is offset + i
  std::vector<double> e;
  double sum = 0;
  int rows = 0;
  for (int i = 0; i < p.n_q; ++i) {
    const int k = offset + i - 1;
    if (k < 0) continue;
    probability_row(in.variant, p, in.result, in.head, i, k, k + 1, e);
    sum += e[0];
    ++rows;
  }
  return rows ? sum / rows : std::nan("");
}

}  // namespace

const std::vector<HeadMetric>& head_metrics() {
  static const std::vector<HeadMetric> table = {
      {"entropy", "Mean row entropy (nats)", "Entropy (nats)",
       "mean over queries of the entropy of the attention row", false, false,
       [](const HeadMetricInput& in) { return mean(in.metrics.entropy); }},
      {"sink_mass", "Mass on the most-attended token", "Sink mass",
       "largest mean mass any one key receives (attention sinks, Xiao et al. 2023)", false, true,
       [](const HeadMetricInput& in) {
         return in.metrics.received.empty() ? std::nan("")
                                            : double(*std::max_element(in.metrics.received.begin(),
                                                                       in.metrics.received.end()));
       }},
      {"prev_token", "Mass on the previous token", "Previous token",
       "mean over queries of the probability on the token before the query (previous-token "
       "heads, Olsson et al. 2022)",
       false, true, previous_token},
      {"output_error", "Relative output error vs dense", "Output error",
       "||O - O_dense|| / ||O_dense|| of the head", true, false,
       [](const HeadMetricInput& in) { return in.metrics.rel_error; }},
      {"mass_recall", "Dense mass kept (recall)", "Mass recall",
       "mean over queries of the dense probability mass inside the kept set", true, true,
       [](const HeadMetricInput& in) { return in.metrics.mass_recall; }},
  };
  return table;
}

const std::vector<std::string>& head_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const HeadMetric& m : head_metrics()) n.push_back(m.name);
    return n;
  }();
  return names;
}

int head_metric_index(const std::string& name) {
  const auto& n = head_metric_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (n[i] == name) return int(i);
  std::string list;
  for (const auto& s : n) list += (list.empty() ? "" : ", ") + s;
  throw Error(ErrorCode::InvalidArgument,
              "unknown head-grid metric '" + name + "' (known: " + list + ")");
}

std::string head_metric_title(const std::string& name) {
  return head_metrics()[size_t(head_metric_index(name))].title;
}

}  // namespace attn::core
