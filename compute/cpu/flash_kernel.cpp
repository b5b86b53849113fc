#include "compute/cpu/flash_kernel.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "compute/cpu/bf16_tiles.h"
#include "compute/cpu/score_tile.h"
#include "compute/cpu/tile_kernels.h"
#include "compute/cpu/tile_plan.h"

namespace attn::cpu::ATTN_CPU_NS {

namespace {

struct FlashScratch {
  QueryTile tile;
  std::vector<Chunk> chunks;
  std::vector<float> st;  // f32 [rows of all buffered chunks, kBQ]
  std::vector<float> o;   // f32 [kBQ, dv] (bf16 tiles: O^T, f32 [dv, kBQ])
  std::vector<uint32_t>
      pp;  // bf16 tiles: a chunk's probabilities as bf16 pairs, u32 [kBKTile / 2 + 16, kBQ]
  alignas(64) float m[kBQ], l[kBQ], alpha[kBQ];
  alignas(64) float stat[kBQ], inv[kBQ];
  alignas(64) float cmax[kBQ];  // bf16 tiles: the chunk's max per query, from the tile product
  EntmaxScratch es;             // entmax candidates
};

void flash_tile(KernelContext& c, const TileItem& it, FlashScratch& s) {
  using K = Normaliser::Kind;
  const Normaliser& norm = c.spec.norm;
  const bool softmax = norm.kind == K::Softmax;
  const bool entmax = norm.kind == K::Entmax15;
  QueryTile& t = s.tile;
  t.pack(c, it.h, it.q0, it.rows, c.scale * (c.base2_softmax() ? kLog2e : 1.0f));
  build_chunks(c, it, t, s.chunks);
  const int cols = t.cols;
  s.o.resize(size_t(kBQ) * c.dv);
  bool first = true;  // the first V product initialises O (no zero fill per tile)
  std::fill(s.m, s.m + kBQ, kNegInf);
  std::fill(s.l, s.l + kBQ, 0.0f);

  int64_t entries = 0, pv_entries = 0;  // scores computed, probabilities applied to V
  if (entmax) {
    size_t total = 0;
    for (const Chunk& ch : s.chunks) total += ch.nj;
    if (s.st.size() < total * kBQ) s.st.resize(total * kBQ);
    size_t off = 0;
    for (const Chunk& ch : s.chunks) {
      score_chunk(c, t, ch, false, s.st.data() + off * kBQ, kBQ);
      off += ch.nj;
      entries += int64_t(ch.nj) * it.rows;
    }
    normalise_buffered(norm, c.n_k, s.st.data(), total, it.rows, cols, s.stat, s.inv, s.es);
    off = 0;
    for (const Chunk& ch : s.chunks) {
      const float* p = s.st.data() + off * kBQ;
      off += ch.nj;
      if (!any_nonzero(p, ch.nj, cols, kBQ)) continue;  // entmax rows are mostly zero
      pv_any(c, t, p, kBQ, ch.nj, it.rows, v_at(c, it.h, ch.j0), v_ld(c), s.o.data(), c.dv, nullptr,
             first);
      first = false;
      pv_entries += int64_t(ch.nj) * it.rows;
    }
  } else {
    if (s.st.size() < size_t(kBK) * kBQ) s.st.resize(size_t(kBK) * kBQ);
    // A layout's chunks jump around the keys: each chunk's values, and the next chunk's keys,
    // are asked for while this chunk's scores are computed.
    const bool jumps = c.layout.kind != Layout::Kind::Dense;
    const size_t eb = size_t(element_bytes(c.prec));
    if (jumps && !s.chunks.empty())
      prefetch_range(k_at(c, it.h, s.chunks[0].j0), size_t(s.chunks[0].nj) * c.d * eb);
    for (size_t ci = 0; ci < s.chunks.size(); ++ci) {
      const Chunk& ch = s.chunks[ci];
      if (jumps) {
        prefetch_range(v_at(c, it.h, ch.j0), size_t(ch.nj) * v_ld(c) * eb);
        if (ci + 1 < s.chunks.size() && s.chunks[ci + 1].j0 != ch.j0 + ch.nj)
          prefetch_range(k_at(c, it.h, s.chunks[ci + 1].j0),
                         size_t(s.chunks[ci + 1].nj) * c.d * eb);
      }
      score_chunk(c, t, ch, softmax, s.st.data(), kBQ);
      if (softmax) {
        softmax_step(s.st.data(), ch.nj, cols, kBQ, ch.causal || ch.partial || cols != it.rows, s.m,
                     s.l, s.alpha);
      } else {
        elementwise_probs(norm, c.n_k, s.st.data(), ch.nj, cols, kBQ);
        if (norm.kind == K::SoftplusL1) add_column_sums(s.st.data(), ch.nj, cols, kBQ, s.l);
      }
      pv_any(c, t, s.st.data(), kBQ, ch.nj, it.rows, v_at(c, it.h, ch.j0), v_ld(c), s.o.data(),
             c.dv, softmax ? s.alpha : nullptr, first);
      first = false;
      entries += int64_t(ch.nj) * it.rows;
      pv_entries += int64_t(ch.nj) * it.rows;
    }
  }

  if (first) std::fill(s.o.begin(), s.o.end(), 0.0f);  // nothing kept at all
  // Normalise and write out. Rows with no kept key get O = 0 and row stat 0.
  if (!entmax) {
    for (int i = 0; i < it.rows; ++i) {
      s.stat[i] = 0.0f;
      s.inv[i] = 1.0f;
      if (softmax || norm.kind == K::SoftplusL1) {
        const bool any = s.l[i] > 0.0f;
        s.inv[i] = any ? 1.0f / s.l[i] : 0.0f;
        // Softmax runs in base 2: lse = (m2 + log2 l) ln 2.
        if (any) s.stat[i] = softmax ? (s.m[i] + std::log2(s.l[i])) * kLn2 : std::log(s.l[i]);
      }
    }
  }
  for (int i = 0; i < it.rows; ++i) {
    float* out = c.o + (size_t(it.h) * c.n_q + it.q0 + i) * c.d;
    const float* acc = s.o.data() + size_t(i) * c.dv;
    for (int k = 0; k < c.d; ++k) out[k] = acc[k] * s.inv[i];
    c.row_stat[size_t(it.h) * c.n_q + it.q0 + i] = s.stat[i];
  }
  c.qk_entries += entries;
  c.pv_entries += pv_entries;
  // K and V rows once per query tile, Q read and O written, in their storage.
  const int64_t eb = element_bytes(c.prec);
  c.bytes += entries / std::max(1, it.rows) * int64_t(c.d) * 2 * eb +
             int64_t(it.rows) * (c.d * (eb + 4) + 4);
}

// flash_tile on bf16 tile products, AMX or vdpbf16ps (bf16 storage; streaming normalisers): each
// chunk's scores are one tile product of K rows and the packed Q pairs, the softmax runs in f32 as
// everywhere, and the probabilities, rounded to bf16 as FlashAttention rounds them, meet V^T in a
// second product that accumulates O^T in f32. Chunks of kBKTile keys (128: ~3% faster than 64
// on AVX512-BF16).
void flash_tile_bf16(KernelContext& c, const TileItem& it, FlashScratch& s) {
  using K = Normaliser::Kind;
  const Normaliser& norm = c.spec.norm;
  const bool softmax = norm.kind == K::Softmax;
  QueryTile& t = s.tile;
  const float qscale = c.scale * (c.base2_softmax() ? kLog2e : 1.0f);
  t.pack(c, it.h, it.q0, it.rows, qscale);
  build_chunks(c, it, t, s.chunks, kBKTile);
  const int cols = t.cols;
  s.o.resize(size_t(c.dv) * kBQ);
  s.pp.resize(size_t(kBKTile / 2 + 16) * kBQ);
  if (s.st.size() < size_t(kBKTile) * kBQ) s.st.resize(size_t(kBKTile) * kBQ);
  std::fill(s.m, s.m + kBQ, kNegInf);
  std::fill(s.l, s.l + kBQ, 0.0f);
  bool first = true;
  int64_t entries = 0;
  tiles::begin(c);
  for (const Chunk& ch : s.chunks) {
    // The chunk's V^T is dv short runs a whole row of keys apart (32 KB at N = 16384): too many
    // streams for the hardware prefetcher, so they are asked for while the scores are computed.
    const uint16_t* vt = c.vt16_at(it.h, ch.j0);
    for (int e = 0; e < c.dv; ++e) prefetch_range(vt + e * c.vt_ld, size_t(ch.nj) * 2);
    // A chunk nothing masks or modifies has its columns' maxes found as the scores leave the
    // registers (no pass over them; 4-6% of the tile's time).
    const bool masked = ch.causal || ch.partial || cols != it.rows;
    const bool fold_max = softmax && !masked && c.spec.mods.empty();
    if (fold_max) std::fill(s.cmax, s.cmax + kBQ, kNegInf);
    const bool have_max = tiles::qk(c, c.k16_row(it.h, ch.j0), size_t(c.d), ch.nj, t.qp.data(), kBQ,
                                    cols, qscale, s.st.data(), kBQ, fold_max ? s.cmax : nullptr);
    finish_scores(c, t, ch, softmax, s.st.data(), kBQ);
    if (softmax) {
      softmax_step(s.st.data(), ch.nj, cols, kBQ, masked, s.m, s.l, s.alpha,
                   have_max ? s.cmax : nullptr);
    } else {
      elementwise_probs(norm, c.n_k, s.st.data(), ch.nj, cols, kBQ);
      if (norm.kind == K::SoftplusL1) add_column_sums(s.st.data(), ch.nj, cols, kBQ, s.l);
    }
    tiles::pv(c, s.st.data(), kBQ, ch.nj, cols, vt, c.vt_ld, s.o.data(), kBQ,
              softmax ? s.alpha : nullptr, first, s.pp.data(), kBQ);
    first = false;
    entries += int64_t(ch.nj) * it.rows;
  }
  tiles::end(c);
  for (int i = 0; i < it.rows; ++i) {
    float stat = 0.0f, inv = 1.0f;
    if (softmax || norm.kind == K::SoftplusL1) {
      const bool any = s.l[i] > 0.0f;
      inv = any ? 1.0f / s.l[i] : 0.0f;
      if (any) stat = softmax ? (s.m[i] + std::log2(s.l[i])) * kLn2 : std::log(s.l[i]);
    }
    if (first) inv = 0.0f;  // nothing kept at all: O^T was never written
    float* out = c.o + (size_t(it.h) * c.n_q + it.q0 + i) * c.d;
    for (int k = 0; k < c.d; ++k) out[k] = first ? 0.0f : s.o[size_t(k) * kBQ + i] * inv;
    c.row_stat[size_t(it.h) * c.n_q + it.q0 + i] = stat;
  }
  c.qk_entries += entries;
  c.pv_entries += entries;
  c.bytes += entries / std::max(1, it.rows) * int64_t(c.d) * 4 + int64_t(it.rows) * (c.d * 6 + 4);
}

}  // namespace

void run_flash(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel) {
  const std::vector<TileItem> items = make_items(c, true);
  std::vector<std::unique_ptr<FlashScratch>> scratch(pool.size());
  pool.parallel_for(
      int64_t(items.size()),
      [&](int64_t k, int w) {
        if (!scratch[w]) scratch[w] = std::make_unique<FlashScratch>();
        if (c.bf16_tiles())
          flash_tile_bf16(c, items[k], *scratch[w]);
        else
          flash_tile(c, items[k], *scratch[w]);
      },
      cancel);
}

}  // namespace attn::cpu::ATTN_CPU_NS
