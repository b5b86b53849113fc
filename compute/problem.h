// An attention problem: Q, K, V for H query heads sharing H_kv key/value heads (GQA),
// n_q queries against n_k keys with explicit token positions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compute/host_buffer.h"

namespace attn {

struct Problem {
  int n_heads = 1;  // H: query heads
  int n_kv_heads =
      1;        // H_kv: key/value heads; H % H_kv == 0, query head h uses kv head h / (H/H_kv)
  int n_q = 0;  // queries per head
  int n_k = 0;  // keys per head
  int d = 0;    // head dimension (Q, K and V share it)
  bool causal = true;  // key j visible from query i iff k_pos[j] <= q_pos[i]
  float scale = 0.0f;  // score scale; 0 means 1/sqrt(d)

  AlignedFloats q;  // f32 [H, n_q, d], 64-byte aligned (host_buffer.h)
  AlignedFloats k;  // f32 [H_kv, n_k, d]
  AlignedFloats v;  // f32 [H_kv, n_k, d]
  // Token positions, strictly increasing. Empty means defaults:
  // k_pos[j] = j, q_pos[i] = n_k - n_q + i (queries are the last n_q tokens).
  std::vector<int32_t> q_pos;       // i32 [n_q]
  std::vector<int32_t> k_pos;       // i32 [n_k]
  std::vector<std::string> labels;  // optional token labels [n_k] for display

  float effective_scale() const;
  int kv_head(int h) const { return h / (n_heads / n_kv_heads); }
  int32_t qpos(int i) const { return q_pos.empty() ? n_k - n_q + i : q_pos[i]; }
  int32_t kpos(int j) const { return k_pos.empty() ? j : k_pos[j]; }
  const float* q_row(int h, int i) const { return q.data() + (size_t(h) * n_q + i) * d; }
  const float* k_row(int h, int j) const { return k.data() + (size_t(kv_head(h)) * n_k + j) * d; }
  const float* v_row(int h, int j) const { return v.data() + (size_t(kv_head(h)) * n_k + j) * d; }
  // True when query i may see key j under the causal rule (always true when bidirectional).
  bool visible(int i, int j) const { return !causal || kpos(j) <= qpos(i); }
};

// Throws attn::Error with a message naming the problem field when shapes, sizes, positions
// or values are invalid (including NaN/Inf in Q, K, V).
void validate(const Problem& p);

// A problem with standard-normal Q, K, V (deterministic for a seed); `qk_std` scales Q and K.
Problem random_problem(int n_heads, int n_kv_heads, int n_q, int n_k, int d, bool causal,
                       uint64_t seed, float qk_std = 1.0f);

}  // namespace attn
