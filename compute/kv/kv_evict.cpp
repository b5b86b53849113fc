#include "compute/kv/kv_evict.h"

#include <algorithm>
#include <numeric>

namespace attn {

std::vector<int> kv_best(const std::vector<int>& cand, const std::vector<double>& score,
                         size_t keep) {
  if (cand.size() <= keep) return cand;
  std::vector<int> order = cand;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return score[size_t(a)] > score[size_t(b)]; });
  order.resize(keep);
  return order;
}

std::vector<double> kv_column_sums(const float* probs, int G, int nq, int n, int q0, int q1) {
  std::vector<double> s(size_t(n), 0.0);
  for (int g = 0; g < G; ++g)
    for (int q = q0; q < q1; ++q) {
      const float* row = probs + (size_t(g) * nq + q) * n;
      for (int e = 0; e < n; ++e) s[size_t(e)] += row[e];
    }
  return s;
}

std::vector<int> kv_all(int n) {
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

int KvEviction::keep_after(int, int) const {
  return -1;
}

std::vector<int> KvEviction::keep(int, int, KvHeadState& st, const float*, int, int, bool) const {
  return kv_all(int(st.pos.size()));
}

std::vector<int> KvEviction::select(const float*, int, const float*, int n, int) const {
  return kv_all(n);
}

std::vector<int> kv_keep(const KvPolicy& p, int layer, int n_layers, KvHeadState& st,
                         const float* probs, int G, int nq, bool first_pass) {
  if (st.pos.empty()) return {};
  return p.evict->keep(layer, n_layers, st, probs, G, nq, first_pass);
}

std::vector<int> kv_select(const KvPolicy& p, const float* q, int G, const float* keys, int n,
                           int d) {
  return p.evict->select(q, G, keys, n, d);
}

}  // namespace attn
