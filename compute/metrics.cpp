#include "compute/metrics.h"

#include <cmath>
#include <limits>

#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"

namespace attn {

double relative_error(const std::vector<float>& o, const std::vector<float>& o_ref) {
  require(o.size() == o_ref.size(), ErrorCode::InvalidArgument,
          "relative_error: outputs differ in size (" + std::to_string(o.size()) + " vs " +
              std::to_string(o_ref.size()) + ")");
  double num = 0, den = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    double e = double(o[i]) - double(o_ref[i]);
    num += e * e;
    den += double(o_ref[i]) * double(o_ref[i]);
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

Metrics compare(const Variant& v, const Problem& p, const Result& var, const Result& ref,
                double sink_threshold) {
  require(var.n_heads == p.n_heads && var.n_q == p.n_q && var.d == p.d && ref.n_heads == p.n_heads &&
              ref.n_q == p.n_q && ref.d == p.d,
          ErrorCode::InvalidArgument, "compare: results do not match the problem's shape");
  require(ref.layout.kind == Layout::Kind::Dense, ErrorCode::InvalidArgument,
          "compare: the reference result must come from the dense variant");
  const Variant dense("dense", nullptr, {}, Normaliser{});
  Metrics m;
  m.rel_error = relative_error(var.o, ref.o);
  m.density = var.stats.density;
  m.stats = var.stats;
  m.entropy.assign(size_t(p.n_heads) * p.n_q, 0.0f);
  m.received.assign(size_t(p.n_heads) * p.n_k, 0.0f);
  const bool kl_defined = v.normaliser().normalised();
  std::vector<double> recall(p.n_heads, 0), kl(p.n_heads, 0);
  // Heads are independent; within a head rows go in chunks so selective replays stay linear.
  parallel_for(p.n_heads, [&](int h) {
    std::vector<double> pv, pr;
    std::vector<int32_t> keys;
    std::vector<double> received(p.n_k, 0.0);
    const int chunk = 64;
    for (int i0 = 0; i0 < p.n_q; i0 += chunk) {
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
  double rows = double(p.n_heads) * p.n_q;
  m.mass_recall = 0;
  m.row_kl = 0;
  for (int h = 0; h < p.n_heads; ++h) {
    m.mass_recall += recall[h] / rows;
    m.row_kl += kl[h] / rows;
  }
  if (!kl_defined) m.row_kl = std::numeric_limits<double>::quiet_NaN();
  m.sink_score.assign(p.n_k, 0.0f);
  for (int j = 0; j < p.n_k; ++j) {
    double s = 0;
    for (int h = 0; h < p.n_heads; ++h) s += m.received[size_t(h) * p.n_k + j];
    m.sink_score[j] = float(s / p.n_heads);
    if (m.sink_score[j] > sink_threshold) m.sinks.push_back(j);
  }
  return m;
}

}  // namespace attn
