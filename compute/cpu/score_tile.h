// Scoring one tile: a query tile (up to kBQ queries of one head, Q packed transposed) against a
// run of keys, with the variant's score modifiers and the kept-set mask applied, in the
// transposed layout St[key][query] of tile_kernels.h. Dropped entries become -inf.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/simd.h"

namespace attn::cpu::ATTN_CPU_NS {

inline constexpr int kBQ = 64;  // queries per tile
#ifndef ATTN_CPU_BK
#define ATTN_CPU_BK 64
#endif
inline constexpr int kBK = ATTN_CPU_BK;  // keys per chunk
// Keys per chunk on bf16 tile products: a chunk's fixed costs (the O^T rescale, the softmax's
// bookkeeping) then weigh half as much against the products; its f32 scores (32 KiB) stay in L1.
inline constexpr int kBKTile = 2 * kBK;
inline constexpr int kQV = kBQ / kVW;  // vectors per tile row

// A run of keys [j0, j0 + nj) scored against a query tile.
// Asks for [p, p + bytes) in cache ahead of use: key and value blocks that a sparse layout jumps
// to start cold, where the hardware prefetcher has no stream to follow yet.
inline void prefetch_range(const void* p, size_t bytes) {
  const char* b = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(b + o);
}

struct Chunk {
  int j0 = 0, nj = 0;
  bool causal = false;   // some entry lies past a query's causal limit
  bool partial = false;  // entries kept only where Layout::mask keeps them
};

// One query tile, packed for the micro-kernels.
struct QueryTile {
  int h = 0, q0 = 0, rows = 0;
  int cols = 0;                // rows rounded up to kVW
  float qscale = 0;            // factor folded into qt
  std::vector<float> qt;       // f32 [d, kBQ]: Q^T * qscale; columns past rows are zero
  vi lim[kQV];                 // causal limit per query (0 past rows, so padding is dropped)
  vf qposf[kQV];               // query positions as floats (ALiBi)
  vi qposi[kQV];               // query positions (0 past rows)
  int lim_lo = 0, lim_hi = 0;  // smallest / largest causal limit of the tile's queries
  // bf16 tiles (c.bf16_tiles()): Q's bf16 pairs, unscaled (qk multiplies by qscale after the
  // product).
  std::vector<uint32_t> qp;  // u32 [d / 2, kBQ]: dims 2k, 2k + 1 of each query; zero past rows
  // 16-bit storage: a chunk's K or V rows widened to f32 for the f32 micro-kernels.
  mutable std::vector<float> kw;  // f32 [kBK, d]
  mutable std::vector<float> vw;  // f32 [kBK, dv]

  // Packs queries [q0, q0 + rows) of head h (rows <= kBQ), from c's storage precision.
  void pack(const KernelContext& c, int h, int q0, int rows, float qscale);
};

// Head h's K or V row j in c's storage (float or 16-bit); row strides k_ld(c) and v_ld(c).
const void* k_at(const KernelContext& c, int h, int j);
const void* v_at(const KernelContext& c, int h, int j);
inline size_t k_ld(const KernelContext& c) {
  return size_t(c.d);
}
inline size_t v_ld(const KernelContext& c) {
  return c.half() ? size_t(c.dv) : c.v_ld();
}

// St[j][i] = K[j] . Qt[i] for nj rows of K in c's storage at k (ldk apart; widened through t.kw
// when 16-bit) against the tile's packed queries: qk_tile in any storage.
void qk_any(const KernelContext& c, const QueryTile& t, const void* k, size_t ldk, int nj,
            float* st, int lds);
// pv_tile with V rows in c's storage at v (ldv apart; widened through t.vw when 16-bit).
void pv_any(const KernelContext& c, const QueryTile& t, const float* pt, int ldp, int nj, int rows,
            const void* v, size_t ldv, float* o, int ldo, const float* alpha, bool init);

// score_chunk's second half, for scores computed elsewhere (the AMX path): the modifiers, the
// base-2 factor, the causal limit and the mask applied to st in place.
void finish_scores(const KernelContext& c, const QueryTile& t, const Chunk& chunk, bool to_base2,
                   float* st, int lds);

// St[j][i] = modified, masked score of key chunk.j0 + j against query tile.q0 + i, for the
// tile's cols columns; `to_base2` multiplies by log2(e) after the modifiers (softmax kernels).
void score_chunk(const KernelContext& c, const QueryTile& t, const Chunk& chunk, bool to_base2,
                 float* st, int lds);

// Applies the score modifiers to a row of scores of query position qp against keys whose
// positions are kp[c] (c < n, n % kVW == 0), in place.
void apply_mods_row(const KernelContext& c, int h, int32_t qp, const float* kp, float* s, int n);

// Online softmax over one chunk of scores st (nj x cols, base 2): new running max m per query,
// the chunk's probabilities in place, the running sum l, and alpha = the factor rescaling the
// output so far. `masked`: the chunk may hold -inf entries (which must give exactly 0).
// `chunk_max` (f32 [cols], or null): each column's max over the chunk, found already.
void softmax_step(float* st, int nj, int cols, int lds, bool masked, float* m, float* l,
                  float* alpha, const float* chunk_max = nullptr);

// Elementwise normalisers with no row statistic across keys (Sigmoid, Relu) and SoftplusL1's
// numerator, in place over nj x cols entries; -inf (dropped) becomes exactly 0.
void elementwise_probs(const Normaliser& n, int n_k, float* st, int nj, int cols, int lds);

// Adds the column sums of st (nj x cols) into sum[cols] (summed per chunk, then added, which
// keeps float rounding small over long rows).
void add_column_sums(const float* st, int nj, int cols, int lds, float* sum);

// Per-query candidate lists for the entmax threshold (reused across calls).
struct EntmaxScratch {
  std::vector<std::pair<int32_t, double>> cand[kVW];  // (key row, z) per query of a vector
  std::vector<double> z;
};

// True when some entry of st (nj x cols) is non-zero.
bool any_nonzero(const float* st, int nj, int cols, int lds);

// Turns a buffer of modified, masked scores (natural units, `total` key rows x kBQ) into
// probabilities in place for queries [0, rows); stat[i] gets the row statistic, inv[i] the
// factor the query's output must be scaled by (0 for rows with no kept key).
void normalise_buffered(const Normaliser& n, int n_k, float* st, size_t total, int rows, int cols,
                        float* stat, float* inv, EntmaxScratch& es);

// 1.5-entmax threshold tau of a row of kept modified scores s (z = s / 2): sum [z - tau]_+^2 = 1.
// Newton from max z - 1, then the closed form on the settled support. Empty row: 0.
double entmax15_tau(std::vector<double>& z);

}  // namespace attn::cpu::ATTN_CPU_NS
