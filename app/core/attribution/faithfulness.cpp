#include "app/core/attribution/faithfulness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "compute/error.h"

namespace attn::core {
namespace {

// Average ranks (1-based; ties share their mean rank).
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), size_t(0));
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && x[idx[j + 1]] == x[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * double(i + j) + 1;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = double(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : std::nan("");
}

std::vector<double> pick(const std::vector<float>& s, const std::vector<int>& units) {
  std::vector<double> v;
  for (int u : units) v.push_back(s[size_t(u)]);
  return v;
}

// The values along one order: deletion and insertion at each step.
Curve run_curve(const models::Model& model, const models::ModelInput& in, const Attribution& a,
                const AttributionRequest& q, const std::vector<int>& order,
                const FaithfulnessOptions& o) {
  models::ForwardOptions fo = target_forward(a, q);
  fo.threads = o.threads;
  Curve c;
  const int U = int(order.size());
  for (int k = 0; k <= o.steps; ++k) {
    if (q.cancel && q.cancel->load()) throw Error(ErrorCode::Cancelled, "faithfulness cancelled");
    const int top = int(std::ceil(double(k) * U / o.steps - 1e-9));
    const std::vector<int> removed(order.begin(), order.begin() + top);
    const std::vector<int> hidden(order.begin() + top, order.end());
    const auto del = target_value(model.forward(occluded(in, a, removed), fo), a);
    const auto ins = target_value(model.forward(occluded(in, a, hidden), fo), a);
    c.z_deletion.push_back(float(del.first));
    c.p_deletion.push_back(float(del.second));
    c.z_insertion.push_back(float(ins.first));
    c.p_insertion.push_back(float(ins.second));
  }
  return c;
}

void areas(Curve& c) {
  const double n = double(c.z_deletion.size());
  c.aopc_z = c.aopc_p = c.insertion_z = c.insertion_p = 0;
  for (size_t k = 0; k < c.z_deletion.size(); ++k) {
    c.aopc_z += (c.z_deletion[0] - c.z_deletion[k]) / n;
    c.aopc_p += (c.p_deletion[0] - c.p_deletion[k]) / n;
    c.insertion_z += c.z_insertion[k] / n;
    c.insertion_p += c.p_insertion[k] / n;
  }
}

}  // namespace

uint64_t tie_seed(const Attribution& a, uint64_t seed) {
  // splitmix64 over the values that tell inputs apart
  uint64_t h = seed;
  auto mix = [&h](uint64_t v) {
    h += v + 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  };
  uint64_t zbits = 0;
  static_assert(sizeof(double) == sizeof(uint64_t));
  std::memcpy(&zbits, &a.z, sizeof zbits);
  mix(zbits);
  mix(uint64_t(a.id) << 32 | uint32_t(a.units()));
  return h | 1;  // never 0 (0 means ties by unit)
}

std::vector<int> order_by_score(const std::vector<float>& scores, const std::vector<int>& ranked,
                                uint64_t seed) {
  std::vector<int> o = ranked;
  if (seed != 0) {
    std::mt19937_64 rng(seed);
    std::shuffle(o.begin(), o.end(), rng);
  }
  std::stable_sort(o.begin(), o.end(), [&](int a, int b) {
    const float sa = std::isnan(scores[size_t(a)]) ? -INFINITY : scores[size_t(a)];
    const float sb = std::isnan(scores[size_t(b)]) ? -INFINITY : scores[size_t(b)];
    return sa > sb;
  });
  return o;
}

Faithfulness faithfulness(const models::Model& model, const models::ModelInput& in,
                          const Attribution& a, const AttributionRequest& q,
                          const FaithfulnessOptions& o) {
  require(
      o.steps >= 0 && o.steps <= 1000, ErrorCode::InvalidArgument,
      "faithfulness curves take 1 to 1000 steps (0: automatic), not " + std::to_string(o.steps));
  require(o.random_orders >= 0 && o.random_orders <= 1000, ErrorCode::InvalidArgument,
          "faithfulness takes 0 to 1000 random orders");
  require(!a.ranked.empty(), ErrorCode::InvalidArgument, "no unit to remove");
  FaithfulnessOptions opt = o;
  if (opt.steps == 0) opt.steps = std::min(int(a.ranked.size()), 64);
  Faithfulness f;
  f.steps = opt.steps;
  f.random_orders = opt.random_orders;
  for (int k = 0; k <= opt.steps; ++k) f.fractions.push_back(float(k) / float(opt.steps));
  const uint64_t ties = tie_seed(a, opt.seed);
  for (const MethodScores& m : a.methods) {
    Curve c = run_curve(model, in, a, q, order_by_score(m.scores, a.ranked, ties), opt);
    c.order = m.method;
    areas(c);
    f.curves.push_back(std::move(c));
  }
  if (opt.random_orders > 0) {
    std::mt19937_64 rng(opt.seed);
    Curve mean;
    mean.order = "random";
    for (int r = 0; r < opt.random_orders; ++r) {
      std::vector<int> order = a.ranked;
      std::shuffle(order.begin(), order.end(), rng);
      const Curve c = run_curve(model, in, a, q, order, opt);
      if (mean.z_deletion.empty()) {
        mean.z_deletion.assign(c.z_deletion.size(), 0.0f);
        mean.p_deletion = mean.z_insertion = mean.p_insertion = mean.z_deletion;
      }
      for (size_t k = 0; k < c.z_deletion.size(); ++k) {
        mean.z_deletion[k] += c.z_deletion[k] / float(opt.random_orders);
        mean.p_deletion[k] += c.p_deletion[k] / float(opt.random_orders);
        mean.z_insertion[k] += c.z_insertion[k] / float(opt.random_orders);
        mean.p_insertion[k] += c.p_insertion[k] / float(opt.random_orders);
      }
    }
    areas(mean);
    f.curves.push_back(std::move(mean));
  }
  return f;
}

double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  // O(n^2) pair count: units are tokens or patches (hundreds), not millions.
  double concordant = 0, discordant = 0, tx = 0, ty = 0;
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = i + 1; j < x.size(); ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      if (dx == 0 && dy == 0) continue;
      if (dx == 0) {
        tx += 1;
      } else if (dy == 0) {
        ty += 1;
      } else if ((dx > 0) == (dy > 0)) {
        concordant += 1;
      } else {
        discordant += 1;
      }
    }
  const double d = std::sqrt((concordant + discordant + tx) * (concordant + discordant + ty));
  return d > 0 ? (concordant - discordant) / d : std::nan("");
}

double spearman_rho(const std::vector<double>& x, const std::vector<double>& y) {
  return pearson(ranks(x), ranks(y));
}

double top_k_overlap(const std::vector<double>& x, const std::vector<double>& y, int k) {
  auto top = [k](const std::vector<double>& v) {
    std::vector<int> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int a, int b) { return v[size_t(a)] > v[size_t(b)]; });
    idx.resize(size_t(k));
    std::sort(idx.begin(), idx.end());
    return idx;
  };
  const std::vector<int> a = top(x), b = top(y);
  std::vector<int> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return k > 0 ? double(both.size()) / k : std::nan("");
}

std::vector<RankAgreement> rank_agreement(const Attribution& a, int top_k) {
  std::vector<RankAgreement> out;
  const int k = std::min(top_k, int(a.ranked.size()));
  for (size_t i = 0; i < a.methods.size(); ++i)
    for (size_t j = i + 1; j < a.methods.size(); ++j) {
      const std::vector<double> x = pick(a.methods[i].scores, a.ranked);
      const std::vector<double> y = pick(a.methods[j].scores, a.ranked);
      RankAgreement r;
      r.a = a.methods[i].method;
      r.b = a.methods[j].method;
      r.kendall_tau = kendall_tau_b(x, y);
      r.spearman = spearman_rho(x, y);
      r.top_k_overlap = top_k_overlap(x, y, k);
      r.k = k;
      out.push_back(r);
    }
  return out;
}

}  // namespace attn::core
