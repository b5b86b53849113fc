#include "compute/metrics.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "compute/cpu/gemm.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"
#include "compute/score_mod.h"

namespace attn {

namespace {

// relative_error() of n entries.
double relative_error_of(const float* o, const float* o_ref, size_t n) {
  // Equal outputs (the dense reference against itself): every difference is 0, or NaN where an
  // entry is not finite, so the loop below would give 0 or NaN; found without its sequential
  // double sums.
  if (n == 0 || o == o_ref || std::memcmp(o, o_ref, n * sizeof(float)) == 0) {
    // x * 0 is 0 for finite x and NaN otherwise: sixteen lanes of it (one vector), no branch.
    constexpr size_t kLanes = 16;
    float zero[kLanes] = {};
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (size_t l = 0; l < kLanes; ++l) zero[l] += o[i + l] * 0.0f;
    for (size_t l = 0; i < n; ++i, ++l) zero[l] += o[i] * 0.0f;
    float all = 0;
    for (float z : zero) all += z;
    return all == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  }
  // In double, eight partial sums at a time (one vector of them), then the tail.
  constexpr size_t kLanes = 8;
  double nums[kLanes] = {}, dens[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) {
      const double e = double(o[i + l]) - double(o_ref[i + l]), r = double(o_ref[i + l]);
      nums[l] += e * e;
      dens[l] += r * r;
    }
  for (size_t l = 0; i < n; ++i, ++l) {
    const double e = double(o[i]) - double(o_ref[i]), r = double(o_ref[i]);
    nums[l] += e * e;
    dens[l] += r * r;
  }
  double num = 0, den = 0;
  for (size_t l = 0; l < kLanes; ++l) num += nums[l], den += dens[l];
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

}  // namespace

double relative_error(const std::vector<float>& o, const std::vector<float>& o_ref) {
  require(o.size() == o_ref.size(), ErrorCode::InvalidArgument,
          "relative_error: outputs differ in size (" + std::to_string(o.size()) + " vs " +
              std::to_string(o_ref.size()) + ")");
  return relative_error_of(o.data(), o_ref.data(), o.size());
}

namespace {

void check_shapes(const Problem& p, const Result& var, const Result& ref) {
  require(var.n_heads == p.n_heads && var.n_q == p.n_q && var.d == p.d &&
              ref.n_heads == p.n_heads && ref.n_q == p.n_q && ref.d == p.d,
          ErrorCode::InvalidArgument, "compare: results do not match the problem's shape");
  require(ref.layout.kind == Layout::Kind::Dense, ErrorCode::InvalidArgument,
          "compare: the reference result must come from the dense variant");
}

// What needs no probabilities: output error, density, stats; per-row and per-key arrays sized.
void check_cancel(const std::atomic<bool>* cancel) {
  if (cancel && cancel->load(std::memory_order_relaxed))
    throw Error(ErrorCode::Cancelled, "comparison cancelled");
}

Metrics start_metrics(const Problem& p, const Result& var, const Result& ref) {
  Metrics m;
  m.rel_error = relative_error(var.o, ref.o);
  m.density = var.stats.density;
  m.stats = var.stats;
  m.entropy.assign(size_t(p.n_heads) * p.n_q, 0.0f);
  m.received.assign(size_t(p.n_heads) * p.n_k, 0.0f);
  return m;
}

// Means over rows, NaN KL for rows that are no distributions, and the sinks.
void finish(Metrics& m, const Problem& p, const std::vector<double>& recall,
            const std::vector<double>& kl, bool kl_defined, double sink_threshold) {
  const double rows = double(p.n_heads) * p.n_q;
  m.mass_recall = 0;
  m.row_kl = 0;
  for (int h = 0; h < p.n_heads; ++h) {
    m.mass_recall += recall[size_t(h)] / rows;
    m.row_kl += kl[size_t(h)] / rows;
  }
  if (!kl_defined) m.row_kl = std::numeric_limits<double>::quiet_NaN();
  m.sink_score.assign(size_t(p.n_k), 0.0f);
  for (int j = 0; j < p.n_k; ++j) {
    double s = 0;
    for (int h = 0; h < p.n_heads; ++h) s += m.received[size_t(h) * p.n_k + j];
    m.sink_score[size_t(j)] = float(s / p.n_heads);
    if (m.sink_score[size_t(j)] > sink_threshold) m.sinks.push_back(j);
  }
}

}  // namespace

Metrics compare_naive(const Variant& v, const Problem& p, const Result& var, const Result& ref,
                      double sink_threshold, const std::atomic<bool>* cancel) {
  check_shapes(p, var, ref);
  const Variant dense("dense", nullptr, {}, Normaliser{});
  Metrics m = start_metrics(p, var, ref);
  const bool kl_defined = v.normaliser().normalised();
  std::vector<double> recall(p.n_heads, 0), kl(p.n_heads, 0);
  // Heads are independent; within a head rows go in chunks so selective replays stay linear.
  parallel_for(p.n_heads, [&](int h) {
    std::vector<double> pv, pr;
    std::vector<int32_t> keys;
    std::vector<double> received(p.n_k, 0.0);
    const int chunk = 64;
    for (int i0 = 0; i0 < p.n_q; i0 += chunk) {
      check_cancel(cancel);
      int i1 = std::min(i0 + chunk, p.n_q);
      probability_block(v, p, var, h, i0, i1, 0, p.n_k, pv);
      probability_block(dense, p, ref, h, i0, i1, 0, p.n_k, pr);
      for (int i = i0; i < i1; ++i) {
        const double* a = pv.data() + size_t(i - i0) * p.n_k;
        const double* b = pr.data() + size_t(i - i0) * p.n_k;
        double kept_mass = 0, row_kl = 0, sum = 0;
        for (int j = 0; j < p.n_k; ++j) sum += a[j];
        double ent = 0;
        layout_row_keys(var.layout, p, h, i, keys);
        for (int32_t j : keys) kept_mass += b[j];
        for (int j = 0; j < p.n_k; ++j) {
          if (a[j] > 0) {
            if (b[j] > 0) row_kl += a[j] * std::log(a[j] / b[j]);
            double q = a[j] / sum;
            ent -= q * std::log(q);
          }
          received[j] += a[j];
        }
        recall[h] += kept_mass;
        kl[h] += row_kl;
        m.entropy[size_t(h) * p.n_q + i] = float(ent);
      }
    }
    for (int j = 0; j < p.n_k; ++j) m.received[size_t(h) * p.n_k + j] = float(received[j] / p.n_q);
  });
  finish(m, p, recall, kl, kl_defined, sink_threshold);
  return m;
}

}  // namespace attn

namespace attn {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;

// Sums over one row's kept keys, from which every row metric follows.
struct RowSums {
  double sum_a = 0;    // variant mass (1 for normalised rows)
  double a_log_a = 0;  // sum a log a over a > 0 (entropy)
  double kept_b = 0;   // dense mass on the kept keys (recall)
  double kl = 0;       // sum a log(a / b) over a > 0, b > 0
};

class FastCompare {
 public:
  FastCompare(const Variant& v, const Problem& p, const Result& var, const Result& ref, Metrics& m,
              const std::atomic<bool>* cancel)
      : v_(v), p_(p), var_(var), ref_(ref), m_(m), cancel_(cancel) {
    default_pos_ = p.q_pos.empty() && p.k_pos.empty();
    same_ = &var == &ref;
    const Normaliser& n = v.normaliser();
    // Dense softmax without modifiers: scores come from one GEMM and log a = s - lse. Both
    // results must have read the same Q and K: a reduced-precision one's probabilities come from
    // its stored rows (probability_block()).
    plain_softmax_ = v.mods().empty() && n.kind == Normaliser::Kind::Softmax &&
                     var.stats.precision == ref.stats.precision;
    dense_softmax_ = var.layout.kind == Layout::Kind::Dense && plain_softmax_;
  }

  // One head: rows in chunks of 64 that share their key reads. Returns recall and KL sums.
  std::pair<double, double> head(int h) const {
    std::vector<double> received(size_t(p_.n_k), 0.0);
    double recall = 0, kl = 0;
    const int chunk = 64;
    std::vector<float> s(dense_softmax_ ? size_t(chunk) * size_t(p_.n_k) : 0);
    Eigen::ArrayXf x(p_.n_k), a(p_.n_k), recv(p_.n_k);  // one row's scores and probabilities
    std::vector<double> pv, pr;
    std::vector<int32_t> keys;
    for (int i0 = 0; i0 < p_.n_q; i0 += chunk) {
      check_cancel(cancel_);
      const int i1 = std::min(i0 + chunk, p_.n_q);
      const int kend = default_pos_ && p_.causal ? std::min(p_.n_k, p_.qpos(i1 - 1) + 1) : p_.n_k;
      if (var_.layout.kind != Layout::Kind::Dense) {
        for (int i = i0; i < i1; ++i)
          add(h, i,
              plain_softmax_ ? sparse_softmax_row(h, i, keys, x, a, received)
                             : sparse_row(h, i, keys, received),
              recall, kl);
      } else if (dense_softmax_) {
        scores(h, i0, i1, kend, s);
        recv.head(kend).setZero();
        for (int i = i0; i < i1; ++i)
          add(h, i,
              softmax_row(h, i, s.data() + size_t(i - i0) * size_t(kend), visible_end(i, kend), x,
                          a, recv),
              recall, kl);
        Eigen::Map<Eigen::ArrayXd>(received.data(), kend) += recv.head(kend).cast<double>();
      } else {
        probability_block(v_, p_, var_, h, i0, i1, 0, kend, pv);
        if (!same_) probability_block(dense_, p_, ref_, h, i0, i1, 0, kend, pr);
        for (int i = i0; i < i1; ++i) {
          const double* a = pv.data() + size_t(i - i0) * size_t(kend);
          const double* b = same_ ? a : pr.data() + size_t(i - i0) * size_t(kend);
          add(h, i, general_row(i, a, b, kend, received), recall, kl);
        }
      }
    }
    for (int j = 0; j < p_.n_k; ++j)
      m_.received[size_t(h) * p_.n_k + size_t(j)] = float(received[size_t(j)] / p_.n_q);
    return {recall, kl};
  }

 private:
  int visible_end(int i, int kend) const {
    return default_pos_ && p_.causal ? std::min(kend, p_.qpos(i) + 1) : kend;
  }

  void add(int h, int i, const RowSums& r, double& recall, double& kl) const {
    recall += r.kept_b;
    kl += r.kl;
    const double ent = r.sum_a > 0 ? std::log(r.sum_a) - r.a_log_a / r.sum_a : 0.0;
    m_.entropy[size_t(h) * p_.n_q + size_t(i)] = float(ent);
  }

  // s = scale * Q[i0:i1] K[0:kend]^T, rows kend apart in `s` (allocated once for the widest
  // chunk: a fresh buffer per chunk costs its page faults again).
  void scores(int h, int i0, int i1, int kend, std::vector<float>& s) const {
    const RowMatrix q = ConstMap(p_.q_row(h, i0), i1 - i0, p_.d) * p_.effective_scale();
    cpu::GemmArgs g;
    g.m = i1 - i0;
    g.n = kend;
    g.k = p_.d;
    g.a = q.data();
    g.lda = p_.d;
    g.b = p_.k_row(h, 0);
    g.ldb = p_.d;
    g.b_nk = true;
    g.c = s.data();
    g.ldc = kend;
    if (!cpu::sgemm(g, 1))
      Eigen::Map<RowMatrix>(s.data(), i1 - i0, kend).noalias() =
          q * ConstMap(p_.k_row(h, 0), kend, p_.d).transpose();
  }

  // Dense softmax: a = exp(s - lse_var), b = exp(s - lse_ref), log a = s - lse_var; visible keys
  // [0, end) (default positions) or those p.visible() allows. Sums in float over one row (Eigen's
  // vectorised reductions), received mass gathered per chunk in float (`recv`) and added to the
  // double totals once per chunk by the caller.
  RowSums softmax_row(int h, int i, const float* s, int end, Eigen::ArrayXf& x, Eigen::ArrayXf& a,
                      Eigen::ArrayXf& recv) const {
    const float lse = var_.row_stat[size_t(h) * p_.n_q + size_t(i)];
    const float lse_ref = ref_.row_stat[size_t(h) * p_.n_q + size_t(i)];
    auto xs = x.head(end);
    auto as = a.head(end);
    xs = Eigen::Map<const Eigen::ArrayXf>(s, end) - lse;
    if (!default_pos_ && p_.causal)
      for (int j = 0; j < end; ++j)
        if (!p_.visible(i, j)) xs[j] = -1e30f;  // exp gives 0, and 0 * x stays 0
    as = xs.exp();
    RowSums r;
    r.sum_a = as.sum();
    r.a_log_a = (as * xs).sum();
    recv.head(end) += as;
    softmax_tail(r, lse, lse_ref);
    return r;
  }

  // Plain softmax rows: b / a = exp(lse_var - lse_ref) for every kept key (one factor per row),
  // so recall and KL follow from the row's mass.
  void softmax_tail(RowSums& r, float lse, float lse_ref) const {
    r.kept_b = same_ ? r.sum_a : r.sum_a * std::exp(double(lse) - double(lse_ref));
    r.kl = same_ ? 0.0 : r.sum_a * (double(lse_ref) - double(lse));
  }

  // Softmax without modifiers on kept keys only: the scores of each run of consecutive keys from
  // one matrix-vector product, exp in float over the row (Eigen's vectorised exp), and no log
  // (log a = x - lse_var; recall and KL from softmax_tail, as on the dense path).
  RowSums sparse_softmax_row(int h, int i, std::vector<int32_t>& keys, Eigen::ArrayXf& x,
                             Eigen::ArrayXf& a, std::vector<double>& received) const {
    layout_row_keys(var_.layout, p_, h, i, keys);
    const int n = int(keys.size());
    const Eigen::Map<const Eigen::VectorXf> qi(p_.q_row(h, i), p_.d);
    for (int a = 0; a < n;) {
      int b = a + 1;
      while (b < n && keys[size_t(b)] == keys[size_t(b) - 1] + 1) ++b;
      x.segment(a, b - a).matrix().noalias() =
          ConstMap(p_.k_row(h, keys[size_t(a)]), b - a, p_.d) * qi;
      a = b;
    }
    const float lse = var_.row_stat[size_t(h) * p_.n_q + size_t(i)];
    const float lse_ref = ref_.row_stat[size_t(h) * p_.n_q + size_t(i)];
    auto xs = x.head(n);
    xs = xs * p_.effective_scale() - lse;  // log a
    auto as = a.head(n);
    as = xs.exp();
    RowSums r;
    r.sum_a = as.sum();
    r.a_log_a = (as * xs).sum();
    for (int c = 0; c < n; ++c) received[size_t(keys[size_t(c)])] += as[c];
    softmax_tail(r, lse, lse_ref);
    return r;
  }

  // Kept keys only: variant and dense probabilities from one dot product per key.
  RowSums sparse_row(int h, int i, std::vector<int32_t>& keys,
                     std::vector<double>& received) const {
    layout_row_keys(var_.layout, p_, h, i, keys);
    const Eigen::Map<const Eigen::VectorXf> qi(p_.q_row(h, i), p_.d);
    const float scale = p_.effective_scale();
    const double stat = var_.row_stat[size_t(h) * p_.n_q + size_t(i)];
    const double lse_ref = ref_.row_stat[size_t(h) * p_.n_q + size_t(i)];
    RowSums r;
    for (int32_t j : keys) {
      const float raw = qi.dot(Eigen::Map<const Eigen::VectorXf>(p_.k_row(h, j), p_.d)) * scale;
      float x = raw;
      if (!v_.mods().empty())
        x = apply_score_mods(v_.mods(), x, h, p_.n_heads, p_.qpos(i), p_.kpos(j));
      const double a = normalised_prob(v_.normaliser(), x, stat, p_.n_k);
      const double b = std::exp(double(raw) - lse_ref);
      r.kept_b += b;
      received[size_t(j)] += a;
      if (a > 0) {
        r.sum_a += a;
        r.a_log_a += a * std::log(a);
        if (b > 0) r.kl += a * std::log(a / b);
      }
    }
    return r;
  }

  // Any normaliser or modifier on a dense layout: probabilities in double over visible keys.
  RowSums general_row(int i, const double* a, const double* b, int kend,
                      std::vector<double>& received) const {
    RowSums r;
    const int end = visible_end(i, kend);
    for (int j = 0; j < end; ++j) {
      if (!default_pos_ && !p_.visible(i, j)) continue;
      r.kept_b += b[j];
      received[size_t(j)] += a[j];
      if (a[j] > 0) {
        r.sum_a += a[j];
        r.a_log_a += a[j] * std::log(a[j]);
        if (b[j] > 0) r.kl += a[j] * std::log(a[j] / b[j]);
      }
    }
    return r;
  }

  const Variant& v_;
  const Problem& p_;
  const Result& var_;
  const Result& ref_;
  Metrics& m_;
  const std::atomic<bool>* cancel_;
  const Variant dense_{"dense", nullptr, {}, Normaliser{}};
  bool default_pos_ = true, same_ = false, dense_softmax_ = false, plain_softmax_ = false;
};

}  // namespace

Metrics merge_head_metrics(const Variant& v, const Problem& p, const Result& var, const Result& ref,
                           const std::vector<Metrics>& heads, double sink_threshold) {
  check_shapes(p, var, ref);
  require(heads.size() == size_t(p.n_heads), ErrorCode::InvalidArgument,
          "merge_head_metrics: " + std::to_string(heads.size()) + " head metrics for " +
              std::to_string(p.n_heads) + " heads");
  Metrics m = start_metrics(p, var, ref);
  std::vector<double> recall(size_t(p.n_heads)), kl(size_t(p.n_heads));
  for (int h = 0; h < p.n_heads; ++h) {
    const Metrics& hm = heads[size_t(h)];
    require(
        hm.entropy.size() == size_t(p.n_q) && hm.received.size() == size_t(p.n_k),
        ErrorCode::InvalidArgument,
        "merge_head_metrics: head " + std::to_string(h) + " was compared on a different problem");
    std::copy(hm.entropy.begin(), hm.entropy.end(), m.entropy.begin() + ptrdiff_t(h) * p.n_q);
    std::copy(hm.received.begin(), hm.received.end(), m.received.begin() + ptrdiff_t(h) * p.n_k);
    // A head's means are over its n_q rows: back to sums, so finish() averages over all rows.
    recall[size_t(h)] = hm.mass_recall * p.n_q;
    kl[size_t(h)] = hm.row_kl * p.n_q;  // NaN where rows are no distributions (finish() too)
  }
  finish(m, p, recall, kl, v.normaliser().normalised(), sink_threshold);
  return m;
}

HeadComparison::HeadComparison(const Problem& p, const Result& var, const Result& ref, int h)
    : p_(p), var_(var), ref_(ref), h_(h) {
  check_shapes(p, var, ref);
  require(h >= 0 && h < p.n_heads, ErrorCode::InvalidArgument,
          "HeadComparison: head " + std::to_string(h) + " of " + std::to_string(p.n_heads));
  entropy_.assign(size_t(p.n_q), 0.0f);
  received_.assign(size_t(p.n_k), 0.0);
}

void HeadComparison::add(const SoftmaxRows& rows) {
  require(rows.n_k == p_.n_k && rows.i0 >= 0 && rows.i1 <= p_.n_q, ErrorCode::InvalidArgument,
          "HeadComparison: rows of another problem");
  const bool same = &var_ == &ref_;
  for (int i = rows.i0; i < rows.i1; ++i) {
    const size_t a = size_t(i - rows.i0);
    const double mass = rows.mass[a];
    const float lse = var_.row_stat[size_t(h_) * p_.n_q + size_t(i)];
    const float lse_ref = ref_.row_stat[size_t(h_) * p_.n_q + size_t(i)];
    // Plain softmax rows: b / a = exp(lse_var - lse_ref) on every kept key (one factor per row),
    // so recall and KL follow from the row's mass, as in compare().
    recall_ += same ? mass : mass * std::exp(double(lse) - double(lse_ref));
    kl_ += same ? 0.0 : mass * (double(lse_ref) - double(lse));
    entropy_[size_t(i)] = float(mass > 0 ? std::log(mass) - rows.a_log_a[a] / mass : 0.0);
  }
  // Column sums over the rows' span only (every entry outside it is zero).
  using RowMatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int lo = std::clamp(rows.lo, 0, p_.n_k), w = std::clamp(rows.hi, lo, p_.n_k) - lo;
  if (w == 0 || rows.i1 == rows.i0) return;
  Eigen::Map<Eigen::RowVectorXd>(received_.data() + lo, w) +=
      Eigen::Map<const RowMatrixD, 0, Eigen::OuterStride<>>(rows.p.data() + lo, rows.i1 - rows.i0,
                                                            w, Eigen::OuterStride<>(p_.n_k))
          .colwise()
          .sum();
}

Metrics HeadComparison::metrics(double sink_threshold) const {
  const size_t os = size_t(p_.n_q) * size_t(p_.d), off = size_t(h_) * os;
  Metrics m;
  m.rel_error = relative_error_of(var_.o.data() + off, ref_.o.data() + off, os);
  // The head's share of the layer's stats, as head_result() counts it.
  m.stats = var_.stats;
  const int64_t visible = visible_entries(p_);
  m.stats.kept_entries = layout_kept_entries(var_.layout, p_, h_);
  m.stats.density = visible > 0 ? double(m.stats.kept_entries) / double(visible) : 0.0;
  m.density = m.stats.density;
  m.entropy = entropy_;
  m.received.resize(size_t(p_.n_k));
  for (int j = 0; j < p_.n_k; ++j) m.received[size_t(j)] = float(received_[size_t(j)] / p_.n_q);
  m.mass_recall = recall_ / p_.n_q;
  m.row_kl = kl_ / p_.n_q;
  m.sink_score = m.received;  // one head: the received mass itself
  for (int j = 0; j < p_.n_k; ++j)
    if (m.sink_score[size_t(j)] > sink_threshold) m.sinks.push_back(j);
  return m;
}

Metrics compare(const Variant& v, const Problem& p, const Result& var, const Result& ref,
                double sink_threshold, const std::atomic<bool>* cancel) {
  check_shapes(p, var, ref);
  // Selective rows depend on every earlier row, and approximations have only their implied
  // matrix (served a block at a time): the row-by-row oracle handles them.
  if (v.selective() || v.approximation())
    return compare_naive(v, p, var, ref, sink_threshold, cancel);
  Metrics m = start_metrics(p, var, ref);
  std::vector<double> recall(size_t(p.n_heads), 0), kl(size_t(p.n_heads), 0);
  const FastCompare fc(v, p, var, ref, m, cancel);
  parallel_for(p.n_heads, [&](int h) {
    const auto [rc, k] = fc.head(h);
    recall[size_t(h)] = rc;
    kl[size_t(h)] = k;
  });
  finish(m, p, recall, kl, v.normaliser().normalised(), sink_threshold);
  return m;
}

}  // namespace attn
