// Decode attention over a KV cache's own bytes: one token's queries against the rows of
// compute/kv/kv_rows.h, each row read in its storage format and dequantised in registers
// (kv_kernels.cpp), so a step's time follows the bytes the cache holds.
//
// The kernel is built twice from one source: for the build's baseline (x86-64-v3 in packaged
// builds) and, where the CPU runs it, for AVX-512. Both compute every value the same way
// (16-lane vectors, products and sums rounded separately, one reduction order, the same exp), so
// they give bit-identical results; kv_attend_rows picks the best unless ATTNSCOPE_CPU_ISA names
// another ("avx2" or "generic" for the baseline).
//
// Rows split into chunks of kKvChunkRows per KV head; each chunk keeps its own maximum, sum and
// output (the online softmax), merged in chunk order, so results do not depend on the thread
// count. 1024 rows: with 256, a decode step's cache part took 15-25% longer in bf16, fp8 and
// 4-bit caches at 2,048 entries (each chunk restarts its row streams and pays its own setup), f32
// ~4%; fixed, not sized by thread count, so the merge order stays the same.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compute/kv/kv_rows.h"

namespace attn {

inline constexpr int kKvChunkRows = 1024;

// Rotary positions applied to keys as they are read (models/arch/rope.h's rotate_half
// convention: element i pairs with i + d/2): key row r of KV head g is rotated by table row
// target[g * target_stride + r], whose first d/2 values are the cosines and last d/2 the sines.
// The rotated element is a * cos - b * sin (and b * cos + a * sin), as Rope::apply_at computes it.
struct KvRope {
  const float* table = nullptr;     // f32 [targets, d]
  const int32_t* target = nullptr;  // i32 [H_kv, target_stride]
  int target_stride = 0;
};

// Softmax attention of one token's H queries over rows 0 .. len - 1 of each KV head (query head
// h reads KV head h / (H / H_kv)): scores scale * q . k. q f32 [H, d] (rotated already), out
// f32 [H, d], probs (may be null) f32 [H, len] by row. `isa`: one of kv_kernel_isas(), or null
// for the best.
void kv_attend_rows(const KvRows& k, const KvRows& v, int len, const float* q, int H, float scale,
                    const KvRope* rope, float* out, float* probs, int threads,
                    const char* isa = nullptr);

// Rows idx[0 .. n - 1] of KV head `head` decoded to f32 [n, d] with the same kernels: bit for bit
// what KvRows::decode gives, row by row.
void kv_decode_rows(const KvRows& rows, int head, const int32_t* idx, int n, float* out,
                    const char* isa = nullptr);

// The instruction sets kv_attend_rows runs here, best first: "avx512" (when this binary carries
// it and the CPU runs it) and the baseline ("avx2" or "generic").
std::vector<std::string> kv_kernel_isas();
// The one kv_attend_rows picks without `isa`.
std::string kv_best_isa();

// The oracle: the same attention in f64 over the rows as KvRows::decode gives them (rotated in
// f64), the straightforward way. out f64 [H, d], probs (may be null) f64 [H, len].
void kv_attend_rows_reference(const KvRows& k, const KvRows& v, int len, const float* q, int H,
                              float scale, const KvRope* rope, double* out, double* probs);

}  // namespace attn
