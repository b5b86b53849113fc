#include "compute/cpu/selective_kernel.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "compute/cpu/gather_kernel.h"
#include "compute/cpu/score_tile.h"
#include "compute/cpu/tile_kernels.h"
#include "compute/cpu/tile_plan.h"

namespace attn::cpu::ATTN_CPU_NS {

namespace {

struct SelectiveScratch {
  QueryTile tile;
  std::vector<Chunk> chunks;
  std::vector<float> st;    // f32 [kept keys of the tile, kBQ]: scores, then probabilities
  std::vector<float> o;     // f32 [kBQ, dv]
  std::vector<double> acc;  // f64 [n_k]: accumulated ReLU'd scores per key
  EntmaxScratch es;
  alignas(64) float stat[kBQ], inv[kBQ];
};

void selective_tile(KernelContext& c, SelectiveScratch& s, const TileItem& it) {
  QueryTile& t = s.tile;
  t.pack(c, it.h, it.q0, it.rows, c.scale);
  build_chunks(c, it, t, s.chunks);
  size_t total = 0;
  for (const Chunk& ch : s.chunks) total += ch.nj;
  if (s.st.size() < total * kBQ) s.st.resize(total * kBQ);
  size_t off = 0;
  for (const Chunk& ch : s.chunks) {
    score_chunk(c, t, ch, false, s.st.data() + off * kBQ, kBQ);
    off += ch.nj;
  }
  // Queries in order: each kept score loses the accumulated positive scores that earlier
  // queries gave its key (a key never masks itself; the first token is exempt). Along a key's
  // row of the tile that is an exclusive prefix sum over the tile's queries, in double.
  off = 0;
  for (const Chunk& ch : s.chunks) {
    for (int jj = 0; jj < ch.nj; ++jj) {
      const int j = ch.j0 + jj;
      const vi kp = splati(c.kpos[j]);
      const bool exempt = c.kpos[j] == 0;
      float* row = s.st.data() + (off + jj) * kBQ;
      double carry = s.acc[j];
      for (int v = 0; v < t.cols / kVW; ++v) {
        const vf x = loadu(row + v * kVW);
        // Dropped entries are -inf, so x > 0 also means "kept".
        const vi gives = (x > 0.0f) & (t.qposi[v] != kp) & splati(exempt ? 0 : -1);
        const vd r = to_double(select(gives, x, vf{}));
        const vd incl = prefix_sum(r);
        storeu(row + v * kVW, to_float(to_double(x) - (carry + (incl - r))));
        carry += incl[kVW - 1];
      }
      s.acc[j] = carry;
    }
    off += ch.nj;
  }
  normalise_buffered(c.spec.norm, c.n_k, s.st.data(), total, it.rows, t.cols, s.stat, s.inv, s.es);
  s.o.resize(size_t(kBQ) * c.dv);
  bool first = true;  // the first V product initialises O
  off = 0;
  int64_t pv = 0;
  for (const Chunk& ch : s.chunks) {
    const float* p = s.st.data() + off * kBQ;
    off += ch.nj;
    if (!any_nonzero(p, ch.nj, t.cols, kBQ)) continue;  // entmax rows are mostly zero
    pv_any(c, t, p, kBQ, ch.nj, it.rows, v_at(c, it.h, ch.j0), v_ld(c), s.o.data(), c.dv, nullptr,
           first);
    first = false;
    pv += int64_t(ch.nj) * it.rows;
  }
  if (first) std::fill(s.o.begin(), s.o.end(), 0.0f);
  for (int i = 0; i < it.rows; ++i) {
    float* out = c.o + (size_t(it.h) * c.n_q + it.q0 + i) * c.d;
    const float* a = s.o.data() + size_t(i) * c.dv;
    for (int k = 0; k < c.d; ++k) out[k] = a[k] * s.inv[i];
    c.row_stat[size_t(it.h) * c.n_q + it.q0 + i] = s.stat[i];
  }
  c.qk_entries += int64_t(total) * it.rows;
  c.pv_entries += pv;
  const int64_t eb = element_bytes(c.prec);
  c.bytes += int64_t(total) * c.d * 2 * eb + int64_t(it.rows) * (c.d * (eb + 4) + 4);
}

}  // namespace

void run_selective(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel) {
  if (c.layout.kind == Layout::Kind::Indices) {
    run_gather(c, pool, cancel);  // the gather kernel walks rows in order when selective
    return;
  }
  // Tiles grouped by head, in query order within a head.
  const std::vector<TileItem> items = make_items(c, false);
  std::vector<size_t> head_start(c.H + 1, items.size());
  for (size_t k = items.size(); k-- > 0;) head_start[items[k].h] = k;
  for (int h = c.H - 1; h >= 0; --h) head_start[h] = std::min(head_start[h], head_start[h + 1]);
  std::vector<std::unique_ptr<SelectiveScratch>> scratch(pool.size());
  pool.parallel_for(
      c.H,
      [&](int64_t h, int w) {
        if (!scratch[w]) scratch[w] = std::make_unique<SelectiveScratch>();
        SelectiveScratch& s = *scratch[w];
        s.acc.assign(c.n_k, 0.0);
        for (size_t k = head_start[h]; k < head_start[h + 1]; ++k) {
          if (cancel && cancel->load(std::memory_order_relaxed)) return;
          selective_tile(c, s, items[k]);
        }
      },
      cancel);
}

}  // namespace attn::cpu::ATTN_CPU_NS
