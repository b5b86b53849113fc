// Internal to compute/kv: the per-chunk kernel of kv_attend_rows, once per instruction set
// (kv_kernels.cpp for the baseline, kv_kernels_avx512.cpp for AVX-512).
#pragma once
#include <cstdint>

#include "compute/kv/kv_rows.h"

namespace attn::kv_detail {

// One chunk of one KV head: rows r0 .. r1 - 1 against the head's G queries.
struct ChunkArgs {
  const KvRows* k = nullptr;
  const KvRows* v = nullptr;
  const float* q = nullptr;  // f32 [G, dp]: the KV head's queries, zero past d
  int G = 1, d = 0, dp = 0;  // dp: d rounded up to 16
  float scale = 1;
  const float* rope = nullptr;      // f32 [targets, d], or null (no rotation)
  const int32_t* target = nullptr;  // i32 [capacity]: the KV head's row targets
  int g = 0, r0 = 0, r1 = 0;
  float* s = nullptr;  // f32 [G, s_stride]: query j's row r at s[j * s_stride + r]; gets
                       // exp(score - m_j)
  int s_stride = 0;
  float* m = nullptr;    // f32 [G]: each query's largest score over the chunk
  float* l = nullptr;    // f32 [G]: sum of the chunk's exp(score - m)
  float* acc = nullptr;  // f32 [G, dp]: sum of exp(score - m) * v
};

struct Kernels {
  const char* isa;
  void (*chunk)(const ChunkArgs&);
  // Rows idx[0 .. n - 1] of KV head h decoded to f32 [n, d] (what KvRows::decode gives).
  void (*decode)(const KvRows& rows, int h, const int32_t* idx, int n, float* out);
};

// The baseline build's kernels.
const Kernels& baseline_kernels();
// The AVX-512 build's, when this binary has one (null otherwise, also when the baseline is
// AVX-512 already); whether the CPU runs it is the caller's question.
const Kernels* avx512_kernels_if_built();

}  // namespace attn::kv_detail
