// Eviction decisions of the KV-cache policies (compute/kv/kv_policy.h), for one KV head of one
// layer. Pure functions of positions and probabilities, so tests can compare each with a naive
// re-implementation and the model's cache only moves rows. Each eviction piece implements its
// rule in its own file (compute/kv/eviction/); the helpers below are what they share.
#pragma once
#include <cstdint>
#include <vector>

#include "compute/kv/kv_policy.h"

namespace attn {

// What one KV head of one layer holds, in cache order (ascending stream positions).
struct KvHeadState {
  std::vector<int32_t> pos;  // stream position of each entry
  std::vector<double> acc;   // kv_h2o: attention each entry has accumulated
};

// The entries to keep (ascending indices into st.pos) after a pass attended: `probs` f32
// [G, nq, n] holds what the G query heads of the group gave each of the n = st.pos.size()
// entries for each of the pass's nq queries (the last nq entries). `first_pass` is true for
// the prefill (snapkv and pyramidkv compress only then). Updates st.acc for kv_h2o.
std::vector<int> kv_keep(const KvPolicy& policy, int layer, int n_layers, KvHeadState& st,
                         const float* probs, int G, int nq, bool first_pass);

// The entries a decode step attends to (ascending) when the policy selects (KvEviction::selects,
// kv_quest: pages of `page` entries from entry 0, the page of the newest entry always and the
// k - 1 others with the highest bound sum_g sum_c max(q_gc * min_c, q_gc * max_c) over the
// page's keys, ties to the earlier page); every entry otherwise.
// q f32 [G, d] (the group's queries), keys f32 [n, d] as attention reads them.
std::vector<int> kv_select(const KvPolicy& policy, const float* q, int G, const float* keys, int n,
                           int d);

// PyramidKV's budget for one layer (keys kept besides the observation window): linearly from
// 2(budget-window) - m at layer 0 down to m = (budget-window)/beta at the last layer, so the
// layers share (budget-window) per layer on average (Cai et al. 2024).
int pyramid_layer_keep(int budget, int window, double beta, int layer, int n_layers);

// ---- shared by the eviction pieces ----

// Keeps `keep` of the candidate entries, highest score first; ties keep the older entry (the
// newer one goes, as the h2o pattern breaks them). Returns the survivors' indices (not sorted).
std::vector<int> kv_best(const std::vector<int>& cand, const std::vector<double>& score,
                         size_t keep);
// Sum over the group's heads of the probabilities rows [q0, q1) gave each of the n entries.
std::vector<double> kv_column_sums(const float* probs, int G, int nq, int n, int q0, int q1);
// 0, 1, ..., n - 1.
std::vector<int> kv_all(int n);

}  // namespace attn
