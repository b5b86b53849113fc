#include "compute/kv/kv_evict.h"

#include <algorithm>
#include <numeric>

namespace attn {

namespace {

// Keeps `keep` of the candidate entries, highest score first; ties keep the older entry (the
// newer one goes, as the h2o pattern breaks them). Returns the survivors' indices.
std::vector<int> best(const std::vector<int>& cand, const std::vector<double>& score, size_t keep) {
  if (cand.size() <= keep) return cand;
  std::vector<int> order = cand;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return score[size_t(a)] > score[size_t(b)]; });
  order.resize(keep);
  return order;
}

// Sum over the group's heads of the probabilities rows [q0, q1) gave each entry.
std::vector<double> column_sums(const float* probs, int G, int nq, int n, int q0, int q1) {
  std::vector<double> s(size_t(n), 0.0);
  for (int g = 0; g < G; ++g)
    for (int q = q0; q < q1; ++q) {
      const float* row = probs + (size_t(g) * nq + q) * n;
      for (int e = 0; e < n; ++e) s[size_t(e)] += row[e];
    }
  return s;
}

// SnapKV / PyramidKV: the observation window (last `window` entries) plus the `select` earlier
// entries the window's queries attend to most, scores max-pooled over `kernel` neighbours.
std::vector<int> snap(const KvPolicy& p, int select, const float* probs, int G, int nq, int n) {
  const int win = std::min(p.window, n);
  const int prefix = n - win;
  const int obs = std::min(win, nq);  // window queries this pass has
  const std::vector<double> raw = column_sums(probs, G, nq, n, nq - obs, nq);
  std::vector<double> pooled(static_cast<size_t>(prefix));
  const int half = p.kernel / 2;
  for (int e = 0; e < prefix; ++e) {
    double m = raw[size_t(e)];
    for (int j = std::max(0, e - half); j <= std::min(prefix - 1, e + half); ++j)
      m = std::max(m, raw[size_t(j)]);
    pooled[size_t(e)] = m;
  }
  std::vector<int> cand(static_cast<size_t>(prefix));
  std::iota(cand.begin(), cand.end(), 0);
  std::vector<int> keep = best(cand, pooled, size_t(std::max(0, select)));
  for (int e = prefix; e < n; ++e) keep.push_back(e);
  return keep;
}

}  // namespace

std::vector<int> kv_keep(const KvPolicy& p, int layer, int n_layers, KvHeadState& st,
                         const float* probs, int G, int nq, bool first_pass) {
  const int n = int(st.pos.size());
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  if (n == 0) return all;
  const int64_t t = st.pos.back();  // the newest token: the next step is t + 1
  const auto keep_if = [&](auto pred) {
    std::vector<int> k;
    for (int e = 0; e < n; ++e)
      if (pred(int64_t(st.pos[size_t(e)]))) k.push_back(e);
    return k;
  };
  switch (p.evict) {
    case KvPolicy::Evict::Full:
    case KvPolicy::Evict::Quest:
      return all;
    case KvPolicy::Evict::Recent:  // step t + 1 sees t + 2 - window .. t + 1
      return keep_if([&](int64_t s) { return s >= t + 2 - p.window; });
    case KvPolicy::Evict::Streaming:
      return keep_if([&](int64_t s) { return s < p.sinks || s >= t + 2 - p.window; });
    case KvPolicy::Evict::H2o: {
      st.acc.resize(size_t(n), 0.0);
      const std::vector<double> s = column_sums(probs, G, nq, n, 0, nq);
      for (int e = 0; e < n; ++e) st.acc[size_t(e)] += s[size_t(e)];
      // The next step's window is t + 2 - recent .. t + 1; older entries compete as heavy ones.
      std::vector<int> heavy, window;
      for (int e = 0; e < n; ++e)
        (st.pos[size_t(e)] >= t + 2 - p.recent ? window : heavy).push_back(e);
      std::vector<int> keep = best(heavy, st.acc, size_t(p.budget - p.recent));
      keep.insert(keep.end(), window.begin(), window.end());
      std::sort(keep.begin(), keep.end());
      return keep;
    }
    case KvPolicy::Evict::Tova: {
      const std::vector<double> s = column_sums(probs, G, nq, n, nq - 1, nq);
      std::vector<int> keep = best(all, s, size_t(p.budget - 1));
      std::sort(keep.begin(), keep.end());
      return keep;
    }
    case KvPolicy::Evict::SnapKv:
    case KvPolicy::Evict::PyramidKv: {
      const int target = p.keep_after(layer, n_layers);
      if (!first_pass || n <= target) return all;
      std::vector<int> keep = snap(p, target - std::min(p.window, n), probs, G, nq, n);
      std::sort(keep.begin(), keep.end());
      return keep;
    }
  }
  return all;
}

std::vector<int> quest_select(const KvPolicy& p, const float* q, int G, const float* keys, int n,
                              int d) {
  const int pages = (n + p.page - 1) / p.page;
  std::vector<int> chosen;
  if (pages <= p.k) {
    chosen.resize(size_t(pages));
    std::iota(chosen.begin(), chosen.end(), 0);
  } else {
    std::vector<double> bound(static_cast<size_t>(pages), 0.0);
    std::vector<float> lo(static_cast<size_t>(d)), hi(static_cast<size_t>(d));
    for (int pg = 0; pg + 1 < pages; ++pg) {  // the newest page is taken anyway
      const int e0 = pg * p.page, e1 = std::min(n, e0 + p.page);
      std::copy_n(keys + size_t(e0) * d, d, lo.begin());
      std::copy_n(keys + size_t(e0) * d, d, hi.begin());
      for (int e = e0 + 1; e < e1; ++e)
        for (int c = 0; c < d; ++c) {
          lo[size_t(c)] = std::min(lo[size_t(c)], keys[size_t(e) * d + c]);
          hi[size_t(c)] = std::max(hi[size_t(c)], keys[size_t(e) * d + c]);
        }
      double b = 0;
      for (int g = 0; g < G; ++g)
        for (int c = 0; c < d; ++c) {
          const double qc = q[size_t(g) * d + c];
          b += std::max(qc * lo[size_t(c)], qc * hi[size_t(c)]);
        }
      bound[size_t(pg)] = b;
    }
    std::vector<int> cand(static_cast<size_t>(pages - 1));
    std::iota(cand.begin(), cand.end(), 0);
    chosen = best(cand, bound, size_t(p.k - 1));
    chosen.push_back(pages - 1);
    std::sort(chosen.begin(), chosen.end());
  }
  std::vector<int> entries;
  for (int pg : chosen)
    for (int e = pg * p.page; e < std::min(n, (pg + 1) * p.page); ++e) entries.push_back(e);
  return entries;
}

}  // namespace attn
