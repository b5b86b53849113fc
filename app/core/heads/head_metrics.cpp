#include "app/core/heads/head_metrics.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

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
  if (in.previous_token) return *in.previous_token;  // taken from the rows already
  const Problem& p = in.problem;
  const int offset = p.n_k - p.n_q;  // key position of query i is offset + i
  // Softmax without modifiers: exp(s - lse) of the one entry, where kept (probability_row
  // would build the row's general machinery for it).
  const bool fast = plain_softmax(in.variant);
  const int h = in.head;
  std::vector<double> e;
  double sum = 0;
  int rows = 0;
  for (int i = 0; i < p.n_q; ++i) {
    const int k = offset + i - 1;
    if (k < 0) continue;
    if (fast) {
      if (layout_keeps(in.result.layout, p, h, i, k)) {
        double dot = 0;
        for (int c = 0; c < p.d; ++c) dot += double(p.q_row(h, i)[c]) * p.k_row(h, k)[c];
        sum += std::exp(dot * p.effective_scale() - in.result.row_stat[size_t(h) * p.n_q + i]);
      }
    } else {
      probability_row(in.variant, p, in.result, in.head, i, k, k + 1, e);
      sum += e[0];
    }
    ++rows;
  }
  return rows ? sum / rows : std::nan("");
}

// The head-grid metric of a role (head_roles.h): its score on this input, NaN where the roles
// were not computed.
HeadMetric role_metric(size_t index) {
  const HeadRole& r = head_roles()[index];
  return {r.grid_id,
          r.title,
          r.grid_label,
          r.definition + " (" + r.source + ")",
          false,
          true,
          [index](const HeadMetricInput& in) {
            return in.roles ? in.roles->value[index] : std::nan("");
          }};
}

}  // namespace

namespace {

// |x| of d floats, in double: eight partial sums (one vector of them), then the tail.
double norm(const float* x, int d) {
  constexpr int kLanes = 8;
  double part[kLanes] = {};
  int e = 0;
  for (; e + kLanes <= d; e += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] += double(x[e + l]) * double(x[e + l]);
  for (int l = 0; e < d; ++e, ++l) part[l] += double(x[e]) * double(x[e]);
  double s = 0;
  for (double v : part) s += v;
  return std::sqrt(s);
}

// A head's rows as the detectors read them, less the rows themselves: sizes, ids and the norms
// of its outputs and values (the no-op role).
HeadRows head_rows_of(const Problem& p, const Result& r, int head,
                      const std::vector<int32_t>* ids) {
  HeadRows rows;
  rows.n_q = p.n_q;
  rows.n_k = p.n_k;
  rows.causal = p.causal;
  if (ids && ids->size() == size_t(p.n_k)) rows.ids = ids;
  rows.out_norm.resize(size_t(p.n_q));
  rows.value_norm.resize(size_t(p.n_k));
  for (int i = 0; i < p.n_q; ++i) rows.out_norm[size_t(i)] = norm(r.o_row(head, i), p.d);
  for (int k = 0; k < p.n_k; ++k) rows.value_norm[size_t(k)] = norm(p.v_row(head, k), p.d);
  return rows;
}

constexpr int kRows = 64;  // rows of a head computed at once (one GEMM per block)

}  // namespace

RoleScores panel_role_scores(const Variant& v, const Problem& p, const Result& r, int head,
                             const std::vector<int32_t>* ids) {
  HeadRows rows = head_rows_of(p, r, head, ids);
  // Rows come in order: probabilities are computed kRows at a time.
  auto block = std::make_shared<SoftmaxRows>();
  auto general = std::make_shared<std::vector<double>>();
  auto block_start = std::make_shared<int>(-1);
  const bool fast = plain_softmax(v);
  rows.row = [&v, &p, &r, head, block, general, block_start, fast](int i, std::vector<double>&) {
    if (*block_start < 0 || i < *block_start || i >= *block_start + kRows) {
      *block_start = i - i % kRows;
      const int end = std::min(p.n_q, *block_start + kRows);
      if (fast)
        softmax_rows(p, r, head, *block_start, end, *block);
      else
        probability_block(v, p, r, head, *block_start, end, 0, p.n_k, *general);
    }
    return fast ? block->row(i) : general->data() + size_t(i - *block_start) * size_t(p.n_k);
  };
  return role_scores(rows);
}

std::optional<PanelHead> panel_head(const Variant& v, const Problem& p, const Result& var,
                                    const Result& ref, int head, const std::vector<int32_t>* ids,
                                    SoftmaxRows* scratch) {
  if (!plain_softmax(v) || var.stats.precision != ref.stats.precision) return std::nullopt;
  const HeadRows rows = head_rows_of(p, var, head, ids);
  RoleScorer roles(rows);
  HeadComparison cmp(p, var, ref, head);
  SoftmaxRows own;
  SoftmaxRows& block = scratch ? *scratch : own;
  const int offset = p.n_k - p.n_q;  // key position of query i is offset + i
  double prev = 0;
  int prev_rows = 0;
  for (int i0 = 0; i0 < p.n_q; i0 += kRows) {
    softmax_rows(p, var, head, i0, std::min(p.n_q, i0 + kRows), block);
    cmp.add(block);
    for (int i = block.i0; i < block.i1; ++i) {
      roles.add(i, block.row(i));
      if (offset + i - 1 >= 0) prev += block.row(i)[offset + i - 1], ++prev_rows;
    }
  }
  return PanelHead{cmp.metrics(), roles.scores(),
                   prev_rows ? prev / prev_rows : std::nan("")};
}

const std::vector<HeadMetric>& head_metrics() {
  static const std::vector<HeadMetric> table = {
      {"entropy", "Mean row entropy (nats)", "Entropy (nats)",
       "mean over queries of the entropy of the attention row", false, false,
       [](const HeadMetricInput& in) { return mean(in.metrics.entropy); }},
      {"max_token_mass", "Mass on the most-attended token (max-token mass)", "Max-token mass",
       "largest mass any one key receives, averaged over the queries; the head has a sink (a key "
       "with more than 0.3) exactly when this exceeds 0.3 (attention sinks, Xiao et al. 2023). "
       "Was 'sink_mass'; the first-token mass is the `sink` role's score",
       false, true,
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
  // Then the head roles that have a grid metric, in the roles' order (head_roles.h; `attnscope
  // heads` measures them over a corpus).
  static const std::vector<HeadMetric> with_roles = [] {
    std::vector<HeadMetric> all = table;
    for (size_t r = 0; r < head_roles().size(); ++r)
      if (!head_roles()[r].grid_id.empty()) all.push_back(role_metric(r));
    return all;
  }();
  return with_roles;
}

const std::vector<std::string>& head_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const HeadMetric& m : head_metrics()) n.push_back(m.name);
    return n;
  }();
  return names;
}

const std::vector<std::pair<std::string, std::string>>& head_metric_aliases() {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"sink_mass", "max_token_mass"},
  };
  return aliases;
}

std::string canonical_head_metric(const std::string& name) {
  for (const auto& [old_name, now] : head_metric_aliases())
    if (name == old_name) return now;
  return name;
}

int head_metric_index(const std::string& name_or_alias) {
  const std::string name = canonical_head_metric(name_or_alias);
  const auto& n = head_metric_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (n[i] == name) return int(i);
  std::string list;
  for (const auto& s : n) list += (list.empty() ? "" : ", ") + s;
  throw Error(ErrorCode::InvalidArgument,
              "unknown head-grid metric '" + name + "' (known: " + list + ")");
}

std::string head_metric_help() {
  std::string out;
  for (const HeadMetric& m : head_metrics())
    out += (out.empty() ? "" : "; ") + m.name + ": " + m.definition;
  for (const auto& [old_name, now] : head_metric_aliases())
    out += "; " + old_name + ": deprecated name of " + now;
  return out;
}

std::string head_metric_title(const std::string& name) {
  return head_metrics()[size_t(head_metric_index(name))].title;
}

}  // namespace attn::core
