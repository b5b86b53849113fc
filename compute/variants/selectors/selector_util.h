// Helpers shared by the dynamic selectors: block geometry over index space, causal visibility of
// key blocks, mean pooling, dot products, and assembling layouts.
#pragma once
#include <cstdint>
#include <vector>

#include "compute/layout.h"
#include "compute/problem.h"

namespace attn::detail {

// Largest key index j with kpos(j) <= qpos(i), or -1 (causal visibility frontier of query i).
int last_visible_key(const Problem& p, int i);

// Query blocks [r*b, min((r+1)*b, n_q)) and key blocks [c*b, min((c+1)*b, n_k)) with one size b.
struct BlockGrid {
  int b = 64;
  int n_qb = 0, n_kb = 0;
  std::vector<int> diag;   // i32 [n_qb]: current key block (holding the last query's frontier
                           //             key; 0 when bidirectional with no key before it), -1
                           //             when the block sees no key
  std::vector<int> n_vis;  // i32 [n_qb]: visible key blocks are [0, n_vis[r])

  BlockGrid(const Problem& p, int block);
  int q0(int r) const { return r * b; }
  int q1(int r, const Problem& p) const { return std::min((r + 1) * b, p.n_q); }
  int k0(int c) const { return c * b; }
  int k1(int c, const Problem& p) const { return std::min((c + 1) * b, p.n_k); }
};

// Mean of each block of rows: rows [n, d] (row i at data + i * d) -> f32-in-double [nb, d].
std::vector<double> mean_pool(const float* data, int n, int d, int block);

// Pooled queries of head h [n_qb, d] and pooled keys of each kv head [H_kv][n_kb, d]; adds the
// pooling flops (one add per element, one multiply per pooled element) to *flops.
std::vector<double> pooled_queries(const Problem& p, int h, int block, double* flops);
std::vector<std::vector<double>> pooled_keys(const Problem& p, int block, double* flops);

inline double dot(const double* a, const double* b, int d) {
  double s = 0;
  for (int t = 0; t < d; ++t) s += a[t] * b[t];
  return s;
}
// f32 rows, f64 accumulation in four independent lanes (no serial add chain).
inline double dot(const float* a, const float* b, int d) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int t = 0;
  for (; t + 4 <= d; t += 4) {
    s0 += double(a[t]) * double(b[t]);
    s1 += double(a[t + 1]) * double(b[t + 1]);
    s2 += double(a[t + 2]) * double(b[t + 2]);
    s3 += double(a[t + 3]) * double(b[t + 3]);
  }
  for (; t < d; ++t) s0 += double(a[t]) * double(b[t]);
  return (s0 + s1) + (s2 + s3);
}

// C = A B^T in f32 on one thread: A f32 [m, k] (row stride lda), B f32 [n, k] (row stride ldb),
// C f32 [m, n] (row stride ldc). The AVX-512 GEMM where the CPU has it, else Eigen.
void gemm_abt(const float* a, int lda, const float* b, int ldb, float* c, int ldc, int m, int n,
              int k);

// CSR block layout from per-row kept key blocks (each row sorted ascending); every block is
// flagged full (no element mask: the causal rule is the only one inside a kept block).
BlockLayout block_layout_from_rows(const std::vector<std::vector<int32_t>>& rows, int block,
                                   const Problem& p);

// Index layout from per-query kept keys (each row sorted ascending).
IndexLayout index_layout_from_rows(const std::vector<std::vector<int32_t>>& rows);

}  // namespace attn::detail

namespace attn::detail {

// Flops of pooling Q and K into blocks of `block` and scoring every visible (query block, key
// block) pair once per head: what block_topk, top_p and (before sketching) sketch_walk spend.
double pooled_scoring_flops(const Problem& p, int block, int dot_len);

}  // namespace attn::detail

namespace attn::detail {

// log n(r, c): for each query block r and visible key block c < n_vis[r], the log of the mean
// number of keys of c visible to r's queries (block attention estimates weigh blocks by it).
std::vector<std::vector<double>> log_visible_counts(const Problem& p, const BlockGrid& g);

// x <- softmax(x), stable.
void softmax_inplace(std::vector<double>& x);

// Angular LSH (Reformer; lsh and hyper share it): a seeded Gaussian rotation R f32
// [d, max(1, buckets / 2)], and the bucket of x, the argmax over [xR, -xR] (0 for one bucket).
std::vector<float> lsh_rotation(int d, int buckets, uint64_t seed);
int lsh_bucket(const float* x, int d, const std::vector<float>& rot, int buckets);

}  // namespace attn::detail
