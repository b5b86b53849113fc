#include "app/core/heads/head_roles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

// GCC 12 warns inside Eigen's AVX-512 packet code (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include "compute/error.h"

namespace attn::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Running mean that stays NaN until it has seen a value.
struct Mean {
  double sum = 0;
  long count = 0;
  void add(double x) {
    sum += x;
    ++count;
  }
  double get() const { return count ? sum / double(count) : kNaN; }
};

}  // namespace

const std::vector<HeadRole>& head_roles() {
  static const std::vector<HeadRole> roles = {
      {"previous_token", "Previous token", "mean over queries t >= 2 of the mass on token t-1",
       "Olsson et al. 2022, In-context Learning and Induction Heads; TransformerLens"},
      {"duplicate_token", "Duplicate token",
       "mass on earlier occurrences of the query's token, mean over queries that have one",
       "Wang et al. 2022, Interpretability in the Wild; TransformerLens"},
      {"induction", "Induction",
       "mass on the tokens after earlier occurrences of the query's token (BOS + R + R: second "
       "copy to first)",
       "Olsson et al. 2022, In-context Learning and Induction Heads"},
      {"distance", "Mean attention distance",
       "expected |t - k| under the row over the largest reachable distance, mean over queries",
       "Dosovitskiy et al. 2021 (mean attention distance)"},
      {"offset", "Offset concentration",
       "largest share of all mass at one fixed offset t - k (positional heads)",
       "relative-position heads; Voita et al. 2019, Analyzing Multi-Head Self-Attention"},
      {"sink", "Sink (first token)", "mean over queries t >= 1 of the mass on the first token",
       "Xiao et al. 2023, Efficient Streaming Language Models with Attention Sinks"},
      {"no_op", "No-op",
       "mass on the first token times (1 - |o_t| / mean |v|): attends to the sink and writes "
       "little",
       "Guo et al. 2024, Active-Dormant Attention Heads; Gu et al. 2024"},
      {"long_range", "Long range",
       "mass on keys more than D tokens away (first token excepted), mean over queries with "
       "such keys",
       "long-context heads; the distance D is a parameter (default 32)"},
      {"retrieval", "Retrieval",
       "share of copy steps (the model's top-1 token is the one being copied) whose most-"
       "attended key is that earlier token",
       "Wu et al. 2024, Retrieval Head Mechanistically Explains Long-Context Factuality"},
  };
  return roles;
}

int head_role_index(const std::string& name) {
  const auto& r = head_roles();
  std::string list;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].name == name) return int(i);
    list += (list.empty() ? "" : ", ") + r[i].name;
  }
  throw Error(ErrorCode::InvalidArgument, "unknown head role '" + name + "' (known: " + list + ")");
}

HeadRows pattern_rows(const float* pattern, int n_q, int n_k, bool causal) {
  HeadRows h;
  h.n_q = n_q;
  h.n_k = n_k;
  h.causal = causal;
  h.row = [pattern, n_k](int i, std::vector<double>& scratch) {
    const float* r = pattern + size_t(i) * size_t(n_k);
    scratch.assign(r, r + n_k);
    return scratch.data();
  };
  return h;
}

RoleScores role_scores(const HeadRows& h, const RoleOptions& o) {
  require(h.n_q > 0 && h.n_k >= h.n_q && h.row, ErrorCode::InvalidArgument,
          "head roles: the head has no attention rows");
  require(!h.ids || h.ids->size() == size_t(h.n_k), ErrorCode::InvalidArgument,
          "head roles: " + std::to_string(h.ids ? h.ids->size() : 0) + " token ids for " +
              std::to_string(h.n_k) + " keys");
  require(h.out_norm.empty() ||
              (h.out_norm.size() == size_t(h.n_q) && h.value_norm.size() == size_t(h.n_k)),
          ErrorCode::InvalidArgument, "head roles: norms do not match the head's size");
  const int nq = h.n_q, nk = h.n_k, off = nk - nq;
  const int P = h.repeat_period, S = h.repeat_start;
  const bool repeat = P > 0;
  require(!repeat || (S >= 0 && S + 2 * P <= nk), ErrorCode::InvalidArgument,
          "head roles: the repeated sequence does not fit the input");
  double mean_value = 0;
  for (double v : h.value_norm) mean_value += v / double(nk);

  // Earlier occurrences of each key's token (generic duplicate / induction).
  std::vector<std::vector<int>> earlier;
  if (h.ids && !repeat) {
    earlier.resize(size_t(nk));
    std::unordered_map<int32_t, std::vector<int>> seen;
    for (int k = 0; k < nk; ++k) {
      auto& s = seen[(*h.ids)[size_t(k)]];
      earlier[size_t(k)] = s;
      s.push_back(k);
    }
  }

  // Key indices as doubles, and sums over a row's key range.
  const Eigen::ArrayXd index = Eigen::ArrayXd::LinSpaced(nk, 0.0, double(nk - 1));
  auto vec = [](const double* row, int a, int b) {
    return Eigen::Map<const Eigen::ArrayXd>(row + a, b - a);
  };
  auto sum = [&](const double* row, int a, int b) { return vec(row, a, b).sum(); };
  Mean prev, dup, ind, dist, sink, noop, longr, retr;
  // Mass per offset t - k (shifted by nk so that bidirectional offsets are non-negative).
  std::vector<double> at_offset(size_t(2 * nk), 0.0);
  long offset_rows = 0;
  const int D = o.long_range;
  std::vector<double> scratch;
  for (int i = 0; i < nq; ++i) {
    const int t = off + i;
    const double* row = h.row(i, scratch);
    if (t >= 2) prev.add(row[size_t(t - 1)]);
    if (t >= 1) {
      sink.add(row[0]);
      const int reach = h.causal ? t : std::max(t, nk - 1 - t);
      if (reach > 0) {
        const int kend = h.causal ? t + 1 : nk;
        // sum_k row[k] |t - k|, split at t: t * mass - sum k row[k] before, the reverse after
        // (Eigen's vectorised sums: these loops run over every entry of every row).
        const int before = std::min(t + 1, kend);
        double e = double(t) * sum(row, 0, before) -
                   index.head(before).matrix().dot(vec(row, 0, before).matrix());
        if (kend > before)
          e += index.segment(before, kend - before).matrix().dot(vec(row, before, kend).matrix()) -
               double(t) * sum(row, before, kend);
        // Mass at offset t - k: key k lands at slot t - k + nk, descending as k rises.
        Eigen::Map<Eigen::ArrayXd>(at_offset.data() + (t - kend + 1 + nk), kend) +=
            vec(row, 0, kend).reverse();
        dist.add(e / reach);
        ++offset_rows;
      }
      // Long range: keys 1 .. t-D-1 (and t+D+1 .. nk-1 for encoders).
      const int lo_end = std::min(t - D, nk), hi_start = std::max(t + D + 1, 1);
      const bool lo = lo_end > 1, hi = !h.causal && hi_start < nk;
      if (lo || hi)
        longr.add((lo ? sum(row, 1, lo_end) : 0.0) + (hi ? sum(row, hi_start, nk) : 0.0));
      if (!h.out_norm.empty() && mean_value > 0)
        noop.add(row[0] * std::max(0.0, 1.0 - h.out_norm[size_t(i)] / mean_value));
    }
    if (!h.copy_source.empty() && h.copy_source[size_t(i)] >= 0) {
      const int kend = h.causal ? t + 1 : nk;
      const int top = int(std::max_element(row, row + kend) - row);
      retr.add(top == h.copy_source[size_t(i)] ? 1.0 : 0.0);
    }
    if (repeat) {
      const int j = t - S - P;  // position in the second copy
      if (j >= 0 && j < P) {
        dup.add(row[size_t(S + j)]);
        ind.add(row[size_t(S + j + 1)]);
      }
    } else if (h.ids && !earlier[size_t(t)].empty()) {
      double d = 0, n = 0;
      bool has_next = false;
      for (int k : earlier[size_t(t)]) {
        d += row[size_t(k)];
        if (k + 1 < t) {
          n += row[size_t(k + 1)];
          has_next = true;
        }
      }
      dup.add(d);
      if (has_next) ind.add(n);
    }
  }

  RoleScores r;
  r.value.assign(head_roles().size(), kNaN);
  auto set = [&](const char* name, double v) {
    r.value[size_t(head_role_index(name))] = std::isnan(v) ? v : std::clamp(v, 0.0, 1.0);
  };
  set("previous_token", prev.get());
  set("duplicate_token", dup.get());
  set("induction", ind.get());
  set("distance", dist.get());
  if (offset_rows > 0) {
    const auto best = std::max_element(at_offset.begin(), at_offset.end());
    set("offset", *best / double(offset_rows));
    r.offset = int(best - at_offset.begin()) - nk;
  }
  set("sink", sink.get());
  set("no_op", noop.get());
  set("long_range", longr.get());
  set("retrieval", retr.get());
  return r;
}

}  // namespace attn::core
