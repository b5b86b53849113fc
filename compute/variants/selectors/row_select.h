// Selecting keys from one query's row of scores: the keys at or above a threshold (top_theta, and
// the candidates of a top-k), and the k largest with ties to the lower key index (topk, loki).
// One vectorised compare per key; no sort of the row.
#pragma once
#include <cstdint>
#include <vector>

namespace attn::detail {

// Buffers a row's selection reuses from row to row (one per worker).
struct RowScratch {
  std::vector<float> sample;
  std::vector<uint32_t> key;  // order-preserving integer key of each candidate's score
  std::vector<int32_t> cand;
  std::vector<uint32_t> bucket;
};

// Writes the keys j in [0, nv) with score[j] >= thr to cand[0, n), ascending, and returns n.
// cand must hold nv + 16 entries (whole vectors are stored); sc's buffers are sized here.
int keys_at_or_above(const float* score, int nv, float thr, int32_t* cand, RowScratch& sc);

// Writes the min(k, nv) keys of largest score among [0, nv) (ties to the lower index) to out,
// ascending.
void top_keys(const float* score, int nv, int k, RowScratch& sc, int32_t* out);

}  // namespace attn::detail
