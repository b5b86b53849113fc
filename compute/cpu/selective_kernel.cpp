#include "compute/cpu/selective_kernel.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "compute/cpu/score_tile.h"
#include "compute/cpu/tile_kernels.h"

namespace attn::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Scratch {
  QueryTile tile;
  std::vector<float> st;      // f32 [visible keys, kBQ]: the tile's scores, then probabilities
  std::vector<float> o;       // f32 [kBQ, dv]
  std::vector<double> acc;    // f64 [n_k]: accumulated ReLU'd scores per key
  std::vector<uint8_t> keep;  // u8 [n_k]: kept-set row of one query (sparse layouts)
  std::vector<double> z;
  alignas(64) float stat[kBQ], inv[kBQ];
};

// Marks keep[j] for the kept keys j < n of query i (causal rule applied by the caller).
void kept_row(const KernelContext& c, int h, int i, int n, std::vector<uint8_t>& keep) {
  std::fill(keep.begin(), keep.begin() + n, 0);
  if (c.layout.kind == Layout::Kind::Indices) {
    const IndexLayout& x = c.layout.index(h);
    for (int64_t e = x.row_ptr[i]; e < x.row_ptr[i + 1]; ++e)
      if (x.col[e] < n) keep[x.col[e]] = 1;
    return;
  }
  const BlockLayout& b = c.layout.block(h);
  const int r = i / b.bq;
  for (int e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e) {
    const int lo = b.col[e] * b.bk, hi = std::min({lo + b.bk, c.n_k, n});
    const bool partial = c.layout.mask && !b.full[e];
    for (int j = lo; j < hi; ++j)
      keep[j] = !partial || c.layout.mask->keep(c.qpos[i], c.kpos[j]) ? 1 : 0;
  }
}

void run_head(KernelContext& c, Scratch& s, int h, const std::atomic<bool>* cancel) {
  s.acc.assign(c.n_k, 0.0);
  s.keep.assign(c.n_k, 0);
  int64_t qk = 0, pv = 0;
  for (int q0 = 0; q0 < c.n_q; q0 += kBQ) {
    if (cancel && cancel->load(std::memory_order_relaxed)) break;
    const int rows = std::min(kBQ, c.n_q - q0);
    QueryTile& t = s.tile;
    t.pack(c, h, q0, rows, c.scale);
    const int n = t.lim_hi;  // keys visible to some query of the tile
    if (s.st.size() < size_t(n) * kBQ) s.st.resize(size_t(n) * kBQ);
    for (int j0 = 0; j0 < n; j0 += kBK) {
      Chunk ch{j0, std::min(kBK, n - j0), false, false};
      ch.causal = ch.j0 + ch.nj > t.lim_lo;
      score_chunk(c, t, ch, false, s.st.data() + size_t(j0) * kBQ, kBQ);
    }
    qk += int64_t(n) * rows;
    // Queries in order: subtract the accumulator, then add this query's ReLU'd scores to it.
    for (int i = 0; i < rows; ++i) {
      const int qi = q0 + i;
      const int32_t qp = c.qpos[qi];
      if (c.layout.kind != Layout::Kind::Dense) kept_row(c, h, qi, n, s.keep);
      for (int j = 0; j < n; ++j) {
        float& x = s.st[size_t(j) * kBQ + i];
        if (x == kNegInf) continue;  // past the causal limit
        const float score = x;
        x = float(double(score) - s.acc[j]);
        if (c.layout.kind != Layout::Kind::Dense && !s.keep[j]) x = kNegInf;
        if (c.kpos[j] != 0 && c.kpos[j] != qp && score > 0.0f) s.acc[j] += double(score);
      }
    }
    normalise_buffered(c.spec.norm, c.n_k, s.st.data(), size_t(n), rows, t.cols, s.stat, s.inv,
                       s.z);
    s.o.assign(size_t(kBQ) * c.dv, 0.0f);
    for (int j0 = 0; j0 < n; j0 += kBK) {
      const int nj = std::min(kBK, n - j0);
      pv_tile(s.st.data() + size_t(j0) * kBQ, kBQ, nj, rows, c.v_row(h, j0), c.v_ld(), c.dv,
              s.o.data(), c.dv, nullptr);
    }
    pv += int64_t(n) * rows;
    for (int i = 0; i < rows; ++i) {
      float* out = c.o + (size_t(h) * c.n_q + q0 + i) * c.d;
      const float* a = s.o.data() + size_t(i) * c.dv;
      for (int k = 0; k < c.d; ++k) out[k] = a[k] * s.inv[i];
      c.row_stat[size_t(h) * c.n_q + q0 + i] = s.stat[i];
    }
    c.bytes += int64_t(n) * c.d * 8 + int64_t(rows) * (c.d * 8 + 4);
  }
  c.qk_entries += qk;
  c.pv_entries += pv;
}

}  // namespace

void run_selective(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel) {
  std::vector<std::unique_ptr<Scratch>> scratch(pool.size());
  pool.parallel_for(
      c.H,
      [&](int64_t h, int w) {
        if (!scratch[w]) scratch[w] = std::make_unique<Scratch>();
        run_head(c, *scratch[w], int(h), cancel);
      },
      cancel);
}

}  // namespace attn::cpu
