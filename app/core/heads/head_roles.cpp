#include "app/core/heads/head_roles.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
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

// A row's probabilities over keys [a, b), and their sum (Eigen's vectorised sums: the detectors
// that use them run over every entry of every row).
Eigen::Map<const Eigen::ArrayXd> keys(const RoleRow& r, int a, int b) {
  return Eigen::Map<const Eigen::ArrayXd>(r.p + a, b - a);
}
double mass(const RoleRow& r, int a, int b) {
  return keys(r, a, b).sum();
}

// Furthest distance the row of key position t can reach (0 for the first token of a decoder).
int reach(const HeadRows& h, int t) {
  return h.causal ? t : std::max(t, h.n_k - 1 - t);
}

// A detector that is the mean of one number per row (rows that give none are left out).
template <class PerRow>
class MeanDetector final : public RoleDetector {
 public:
  explicit MeanDetector(PerRow per_row) : per_row_(std::move(per_row)) {}
  void add(const RoleRow& r) override {
    if (const std::optional<double> x = per_row_(r)) mean_.add(*x);
  }
  double score() const override { return mean_.get(); }

 private:
  PerRow per_row_;
  Mean mean_;
};

template <class PerRow>
std::unique_ptr<RoleDetector> mean_of(PerRow per_row) {
  return std::make_unique<MeanDetector<PerRow>>(std::move(per_row));
}

// previous_token: mean over queries t >= 2 of A[t, t-1]. Query 1 is left out: its previous token
// is the first token, whose mass is the sink's (Olsson et al. 2022, "In-context Learning and
// Induction Heads"; TransformerLens's previous-token detector; models/train/measure_text.py's
// protocol).
std::unique_ptr<RoleDetector> previous_token(const HeadRows&, const RoleOptions&) {
  return mean_of([](const RoleRow& r) -> std::optional<double> {
    if (r.t < 2) return std::nullopt;
    return r.p[size_t(r.t - 1)];
  });
}

// duplicate_token: mean over queries whose token occurred before of the mass on its earlier
// occurrences (TransformerLens's duplicate-token detector; Wang et al. 2022, "Interpretability in
// the Wild"). On a repeated sequence: the mass from each token of the second copy on the same
// token of the first copy.
// induction: mean over queries whose token occurred before of the mass on the tokens that
// followed its earlier occurrences (Olsson et al. 2022). On a repeated random sequence
// BOS + R + R: from each token of the second copy to the token after its earlier occurrence
// (measure_text.py's protocol).
class EarlierOccurrence final : public RoleDetector {
 public:
  EarlierOccurrence(const HeadRows& h, bool induction) : h_(h), induction_(induction) {
    if (!h.ids || h.repeat_period > 0) return;
    // Earlier occurrences of each key's token.
    earlier_.resize(size_t(h.n_k));
    std::unordered_map<int32_t, std::vector<int>> seen;
    for (int k = 0; k < h.n_k; ++k) {
      auto& s = seen[(*h.ids)[size_t(k)]];
      earlier_[size_t(k)] = s;
      s.push_back(k);
    }
  }

  void add(const RoleRow& r) override {
    const int P = h_.repeat_period, S = h_.repeat_start;
    if (P > 0) {
      const int j = r.t - S - P;  // position in the second copy
      if (j >= 0 && j < P) mean_.add(r.p[size_t(S + j + (induction_ ? 1 : 0))]);
    } else if (h_.ids && !earlier_[size_t(r.t)].empty()) {
      double d = 0, n = 0;
      bool has_next = false;
      for (int k : earlier_[size_t(r.t)]) {
        d += r.p[size_t(k)];
        if (k + 1 < r.t) {
          n += r.p[size_t(k + 1)];
          has_next = true;
        }
      }
      if (!induction_)
        mean_.add(d);
      else if (has_next)
        mean_.add(n);
    }
  }
  double score() const override { return mean_.get(); }

 private:
  const HeadRows& h_;
  const bool induction_;
  std::vector<std::vector<int>> earlier_;
  Mean mean_;
};

// distance: mean over queries t >= 1 of the expected distance |t - k| under the row, divided by
// the largest distance the row can reach: 0 = attends to itself, 1 = to the farthest key (mean
// attention distance, Dosovitskiy et al. 2021).
std::unique_ptr<RoleDetector> distance(const HeadRows& h, const RoleOptions&) {
  // Key indices as doubles.
  auto index = std::make_shared<const Eigen::ArrayXd>(
      Eigen::ArrayXd::LinSpaced(h.n_k, 0.0, double(h.n_k - 1)));
  return mean_of([&h, index](const RoleRow& r) -> std::optional<double> {
    const int t = r.t, kend = r.kend, far = reach(h, t);
    if (t < 1 || far <= 0) return std::nullopt;
    // sum_k row[k] |t - k| over the keys the row sees, in one vectorised pass.
    return (keys(r, 0, kend) * (index->head(kend) - double(t)).abs()).sum() / far;
  });
}

// offset: positional concentration, the largest share of all mass of queries t >= 1 that lies
// at one fixed offset t - k (1 for a head that always looks d tokens back; the offset is reported
// beside it).
class Offset final : public RoleDetector {
 public:
  // Mass per offset t - k, shifted by n_k so that bidirectional offsets are non-negative.
  explicit Offset(const HeadRows& h) : h_(h), at_offset_(size_t(2 * h.n_k), 0.0) {}

  void add(const RoleRow& r) override {
    if (r.t < 1 || reach(h_, r.t) <= 0) return;
    // Key k lands at slot t - k + n_k, descending as k rises.
    Eigen::Map<Eigen::ArrayXd>(at_offset_.data() + (r.t - r.kend + 1 + h_.n_k), r.kend) +=
        keys(r, 0, r.kend).reverse();
    ++rows_;
  }
  double score() const override {
    return rows_ > 0 ? *std::max_element(at_offset_.begin(), at_offset_.end()) / double(rows_)
                     : kNaN;
  }
  int offset() const override {
    if (rows_ == 0) return 0;
    return int(std::max_element(at_offset_.begin(), at_offset_.end()) - at_offset_.begin()) -
           h_.n_k;
  }

 private:
  const HeadRows& h_;
  std::vector<double> at_offset_;
  long rows_ = 0;
};

// sink: mean over queries t >= 1 of A[t, 0], the mass on the first token (Xiao et al. 2023,
// "Efficient Streaming Language Models with Attention Sinks").
std::unique_ptr<RoleDetector> sink(const HeadRows&, const RoleOptions&) {
  return mean_of([](const RoleRow& r) -> std::optional<double> {
    if (r.t < 1) return std::nullopt;
    return r.p[0];
  });
}

// no_op: mean over queries t >= 1 of A[t, 0] * max(0, 1 - |o_t| / mean_k |v_k|): mass on the
// first token while the head's output is small against its values (dormant heads: Guo et al.
// 2024, "Active-Dormant Attention Heads"; Gu et al. 2024, "When Attention Sink Emerges in
// Language Models").
std::unique_ptr<RoleDetector> no_op(const HeadRows& h, const RoleOptions&) {
  double mean_value = 0;
  for (double v : h.value_norm) mean_value += v / double(h.n_k);
  return mean_of([&h, mean_value](const RoleRow& r) -> std::optional<double> {
    if (r.t < 1 || h.out_norm.empty() || mean_value <= 0) return std::nullopt;
    return r.p[0] * std::max(0.0, 1.0 - h.out_norm[size_t(r.i)] / mean_value);
  });
}

// long_range: mean over queries with such keys of the mass on keys more than D tokens away, the
// first token excepted (that mass is the sink's).
std::unique_ptr<RoleDetector> long_range(const HeadRows& h, const RoleOptions& o) {
  const int D = o.long_range;
  return mean_of([&h, D](const RoleRow& r) -> std::optional<double> {
    if (r.t < 1) return std::nullopt;
    // Keys 1 .. t-D-1 (and t+D+1 .. n_k-1 for encoders).
    const int lo_end = std::min(r.t - D, h.n_k), hi_start = std::max(r.t + D + 1, 1);
    const bool lo = lo_end > 1, hi = !h.causal && hi_start < h.n_k;
    if (!lo && !hi) return std::nullopt;
    return (lo ? mass(r, 1, lo_end) : 0.0) + (hi ? mass(r, hi_start, h.n_k) : 0.0);
  });
}

// retrieval: share of copy steps whose most-attended key is the token being copied: at a copy
// step the model's top-1 next token is the one that followed an earlier occurrence of the
// query's token (copy-paste retrieval, Wu et al. 2024, "Retrieval Head Mechanistically Explains
// Long-Context Factuality"); the caller marks the copy steps (HeadRows::copy_source).
std::unique_ptr<RoleDetector> retrieval(const HeadRows& h, const RoleOptions&) {
  return mean_of([&h](const RoleRow& r) -> std::optional<double> {
    if (h.copy_source.empty() || h.copy_source[size_t(r.i)] < 0) return std::nullopt;
    const int top = int(std::max_element(r.p, r.p + r.kend) - r.p);
    return top == h.copy_source[size_t(r.i)] ? 1.0 : 0.0;
  });
}

}  // namespace

const std::vector<HeadRole>& head_roles() {
  static const std::vector<HeadRole> roles = {
      {"previous_token", "Previous token", "mean over queries t >= 2 of the mass on token t-1",
       "Olsson et al. 2022, In-context Learning and Induction Heads; TransformerLens", false, "",
       "", previous_token},
      {"duplicate_token", "Duplicate token",
       "mass on earlier occurrences of the query's token, mean over queries that have one",
       "Wang et al. 2022, Interpretability in the Wild; TransformerLens", true, "dup_token",
       "Duplicate token",
       [](const HeadRows& h, const RoleOptions&) -> std::unique_ptr<RoleDetector> {
         return std::make_unique<EarlierOccurrence>(h, false);
       }},
      {"induction", "Induction",
       "mass on the tokens after earlier occurrences of the query's token (BOS + R + R: second "
       "copy to first)",
       "Olsson et al. 2022, In-context Learning and Induction Heads", true, "induction",
       "Induction",
       [](const HeadRows& h, const RoleOptions&) -> std::unique_ptr<RoleDetector> {
         return std::make_unique<EarlierOccurrence>(h, true);
       }},
      {"distance", "Mean attention distance",
       "expected |t - k| under the row over the largest reachable distance, mean over queries",
       "Dosovitskiy et al. 2021 (mean attention distance)", false, "attn_distance",
       "Attention distance", distance},
      {"offset", "Offset concentration",
       "largest share of all mass at one fixed offset t - k (positional heads)",
       "relative-position heads; Voita et al. 2019, Analyzing Multi-Head Self-Attention", false,
       "offset_conc", "Offset concentration",
       [](const HeadRows& h, const RoleOptions&) -> std::unique_ptr<RoleDetector> {
         return std::make_unique<Offset>(h);
       }},
      {"sink", "First-token sink (first-token mass)",
       "first-token mass: mean over queries t >= 1 of the mass on the first token (the head "
       "grid's 'First-token mass' ranks heads the same way; its 'Max-token mass' takes the "
       "most-attended key instead)",
       "Xiao et al. 2023, Efficient Streaming Language Models with Attention Sinks", false,
       "first_token", "First-token mass", sink},
      {"no_op", "No-op",
       "mass on the first token times (1 - |o_t| / mean |v|): attends to the sink and writes "
       "little",
       "Guo et al. 2024, Active-Dormant Attention Heads; Gu et al. 2024", false, "no_op", "No-op",
       no_op},
      {"long_range", "Long range",
       "mass on keys more than D tokens away (first token excepted), mean over queries with "
       "such keys",
       "long-context heads; the distance D is a parameter (default 32)", false, "long_range",
       "Long range", long_range},
      {"retrieval", "Retrieval",
       "share of copy steps (the model's top-1 token is the one being copied) whose most-"
       "attended key is that earlier token",
       "Wu et al. 2024, Retrieval Head Mechanistically Explains Long-Context Factuality", true, "",
       "", retrieval},
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

RoleScorer::RoleScorer(const HeadRows& h, const RoleOptions& o) : h_(h) {
  require(h.n_q > 0 && h.n_k >= h.n_q, ErrorCode::InvalidArgument,
          "head roles: the head has no attention rows");
  require(!h.ids || h.ids->size() == size_t(h.n_k), ErrorCode::InvalidArgument,
          "head roles: " + std::to_string(h.ids ? h.ids->size() : 0) + " token ids for " +
              std::to_string(h.n_k) + " keys");
  require(h.out_norm.empty() ||
              (h.out_norm.size() == size_t(h.n_q) && h.value_norm.size() == size_t(h.n_k)),
          ErrorCode::InvalidArgument, "head roles: norms do not match the head's size");
  require(h.repeat_period <= 0 ||
              (h.repeat_start >= 0 && h.repeat_start + 2 * h.repeat_period <= h.n_k),
          ErrorCode::InvalidArgument, "head roles: the repeated sequence does not fit the input");
  for (const HeadRole& role : head_roles()) detectors_.push_back(role.detector(h, o));
}

void RoleScorer::add(int i, const double* p) {
  RoleRow row;
  row.i = i;
  row.t = h_.n_k - h_.n_q + i;
  row.kend = h_.causal ? row.t + 1 : h_.n_k;
  row.p = p;
  for (const auto& d : detectors_) d->add(row);
}

RoleScores RoleScorer::scores() const {
  const auto& roles = head_roles();
  RoleScores r;
  r.value.resize(roles.size());
  for (size_t k = 0; k < roles.size(); ++k) {
    const double v = detectors_[k]->score();
    r.value[k] = std::isnan(v) ? v : std::clamp(v, 0.0, 1.0);
    if (const int off = detectors_[k]->offset()) r.offset = off;
  }
  return r;
}

RoleScores role_scores(const HeadRows& h, const RoleOptions& o) {
  require(h.row != nullptr, ErrorCode::InvalidArgument,
          "head roles: the head has no attention rows");
  RoleScorer scorer(h, o);
  // One pass over the rows: each row is fetched (and perhaps converted) once for every role.
  std::vector<double> scratch;
  for (int i = 0; i < h.n_q; ++i) scorer.add(i, h.row(i, scratch));
  return scorer.scores();
}

}  // namespace attn::core
