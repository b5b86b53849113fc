// Eviction decisions of the KV-cache policies (compute/kv/kv_policy.h), for one KV head of one
// layer. Pure functions of positions and probabilities, so tests can compare each with a naive
// re-implementation and the model's cache only moves rows.
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

// The entries a kv_quest step attends to (ascending): pages of `page` entries from entry 0, the
// page of the newest entry always and the k - 1 others with the highest bound
// sum_g sum_c max(q_gc * min_c, q_gc * max_c) over the page's keys (ties: the earlier page).
// q f32 [G, d] (the group's queries), keys f32 [n, d] as attention reads them.
std::vector<int> quest_select(const KvPolicy& policy, const float* q, int G, const float* keys,
                              int n, int d);

}  // namespace attn
