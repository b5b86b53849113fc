#include "app/core/heads/head_metrics.h"

#include <algorithm>
#include <cmath>
#include <memory>

// GCC 12 warns inside Eigen's AVX-512 packet code (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Dense>

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

// Softmax attention with no modifiers over any kept set (dense or a pattern's): its rows are
// exp(s - lse) over the kept keys, with lse the result's row statistic. One f32 GEMM and
// vectorised exponentials per block of rows, where probability_block() (any variant) works entry
// by entry in double precision.
bool plain_softmax(const Variant& v) {
  return !v.approximation() && !v.selective() && v.mods().empty() &&
         v.normaliser().kind == Normaliser::Kind::Softmax;
}

// Mean over queries of the probability on the token just before the query (Olsson et al.
// 2022, "In-context Learning and Induction Heads": previous-token heads; TransformerLens's
// previous-token detector). O(d) per query: one entry of each row.
double previous_token(const HeadMetricInput& in) {
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

void dense_softmax_block(const Problem& p, const Result& r, int h, int i0, int i1,
                         std::vector<double>& out) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const bool dense = r.layout.kind == Layout::Kind::Dense;
  // Dense rows are written up to their causal limit and zeroed past it (below); a pattern's
  // rows are zeroed first, then take their kept entries.
  out.resize(size_t(i1 - i0) * size_t(p.n_k));
  if (!dense) std::fill(out.begin(), out.end(), 0.0);
  // A pattern's rows: their kept keys first, so that scores are computed only over the span of
  // keys the block keeps (a window's few hundred instead of the whole prefix).
  std::vector<int32_t> keys;
  std::vector<int64_t> start(size_t(i1 - i0) + 1, 0);
  int lo = 0, hi = p.n_k;
  if (!dense) {
    std::vector<int32_t> row;
    lo = p.n_k, hi = 0;
    for (int i = i0; i < i1; ++i) {
      layout_row_keys(r.layout, p, h, i, row);  // ascending kept keys
      keys.insert(keys.end(), row.begin(), row.end());
      start[size_t(i - i0) + 1] = int64_t(keys.size());
      if (!row.empty()) lo = std::min(lo, row.front()), hi = std::max(hi, row.back() + 1);
    }
    if (hi <= lo) return;  // nothing kept
  }
  const Eigen::Map<const Mat> q(p.q_row(h, i0), i1 - i0, p.d);
  const Eigen::Map<const Mat> k(p.k_row(h, lo), hi - lo, p.d);
  Mat s = (q * k.transpose()) * p.effective_scale();  // columns: keys lo .. hi-1
  int lim = p.causal ? 0 : p.n_k;  // keys visible to query i: a prefix growing with i
  for (int i = i0; i < i1; ++i) {
    if (p.causal)
      while (lim < p.n_k && p.kpos(lim) <= p.qpos(i)) ++lim;
    const int end = std::min(lim, hi);
    double* o = out.data() + size_t(i - i0) * size_t(p.n_k);
    if (dense) std::fill(o + std::max(end, 0), o + p.n_k, 0.0);
    if (end <= lo) continue;
    auto row = s.row(i - i0).head(end - lo).array();
    row = (row - r.row_stat[size_t(h) * p.n_q + i]).exp();
    if (dense) {
      for (int j = 0; j < end; ++j) o[j] = double(row[j]);
      continue;
    }
    for (int64_t c = start[size_t(i - i0)]; c < start[size_t(i - i0) + 1]; ++c) {
      const int32_t j = keys[size_t(c)];
      if (j >= end) break;
      o[j] = double(row[j - lo]);
    }
  }
}

}  // namespace

RoleScores panel_role_scores(const Variant& v, const Problem& p, const Result& r, int head,
                             const std::vector<int32_t>* ids) {
  HeadRows rows;
  rows.n_q = p.n_q;
  rows.n_k = p.n_k;
  rows.causal = p.causal;
  // Rows come in order: probabilities are computed 64 rows at a time (one GEMM per block).
  auto block = std::make_shared<std::vector<double>>();
  auto block_start = std::make_shared<int>(-1);
  constexpr int kRows = 64;
  const bool fast = plain_softmax(v);
  rows.row = [&v, &p, &r, head, block, block_start, fast](int i, std::vector<double>&) {
    if (*block_start < 0 || i < *block_start || i >= *block_start + kRows) {
      *block_start = i - i % kRows;
      const int end = std::min(p.n_q, *block_start + kRows);
      if (fast)
        dense_softmax_block(p, r, head, *block_start, end, *block);
      else
        probability_block(v, p, r, head, *block_start, end, 0, p.n_k, *block);
    }
    return block->data() + size_t(i - *block_start) * size_t(p.n_k);
  };
  if (ids && ids->size() == size_t(p.n_k)) rows.ids = ids;
  rows.out_norm.resize(size_t(p.n_q));
  rows.value_norm.resize(size_t(p.n_k));
  for (int i = 0; i < p.n_q; ++i) {
    const float* o = r.o_row(head, i);
    double s = 0;
    for (int e = 0; e < p.d; ++e) s += double(o[e]) * o[e];
    rows.out_norm[size_t(i)] = std::sqrt(s);
  }
  for (int k = 0; k < p.n_k; ++k) {
    const float* x = p.v_row(head, k);
    double s = 0;
    for (int e = 0; e < p.d; ++e) s += double(x[e]) * x[e];
    rows.value_norm[size_t(k)] = std::sqrt(s);
  }
  return role_scores(rows);
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
