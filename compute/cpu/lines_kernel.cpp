#include "compute/cpu/lines_kernel.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "compute/cpu/half_rows.h"
#include "compute/cpu/score_tile.h"
#include "compute/cpu/simd.h"
#include "compute/cpu/tile_kernels.h"

namespace attn::cpu::ATTN_CPU_NS {

// Named, not anonymous: isa_avx512.cpp compiles every kernel source into one unit.
namespace lines_impl {

// One head's lines, prepared once for all its tiles: the columns' K and V rows packed, and the
// number of columns below each key (a key j is a column when below[j + 1] > below[j]).
struct LineHead {
  const LineLayout* x = nullptr;
  std::vector<float> kc, vc;         // f32 [columns, d], [columns, dv]
  std::vector<uint16_t> kc16, vc16;  // the same in 16-bit storage (c.half())
  std::vector<int32_t> below;        // i32 [n_k + 1]
};

struct LineScratch {
  QueryTile tile;
  std::vector<float> qs;  // f32 [kBQ, d]: the tile's scaled queries, row-major (diagonal dots)
  std::vector<float> st;  // f32 [kBK, kBQ]: one chunk's scores, transposed
  std::vector<float> ot;  // f32 [kBQ, dv]: output accumulators
  alignas(64) float m[kBQ], l[kBQ], alpha[kBQ];
};

// s[c] = a[c] . b[c] for c < kVW: one pair of rows per lane, summed by a transpose and add tree.
// a: f32 query rows; b: key rows in f32 or 16-bit storage (T), widened as they are loaded.
template <int ND, typename T>
vf pair_dots_fixed(const float* const* a, const T* const* b, Precision prec) {
  vf acc[kVW];
  for (int c = 0; c < kVW; ++c) {
    vf s = loadu(a[c]) * load_row(b[c], prec);
    for (int k = 1; k < ND; ++k)
      s = fmadd(loadu(a[c] + k * kVW), load_row(b[c] + k * kVW, prec), s);
    acc[c] = s;
  }
  return reduce_lanes(acc);
}

// The same for rows a + c * lda and b + c * ldb (consecutive queries and consecutive keys).
template <int ND, typename T>
vf pair_dots_strided_fixed(const float* a, size_t lda, const T* b, size_t ldb, Precision prec) {
  vf acc[kVW];
  for (int c = 0; c < kVW; ++c) {
    const float* x = a + size_t(c) * lda;
    const T* y = b + size_t(c) * ldb;
    vf s = loadu(x) * load_row(y, prec);
    for (int k = 1; k < ND; ++k) s = fmadd(loadu(x + k * kVW), load_row(y + k * kVW, prec), s);
    acc[c] = s;
  }
  return reduce_lanes(acc);
}

template <typename T>
vf pair_dots(const float* const* a, const T* const* b, int d, Precision prec);

template <typename T>
vf pair_dots_strided(const float* a, size_t lda, const T* b, size_t ldb, int d, Precision prec) {
  if (d % kVW == 0) switch (d / kVW) {
      case 1:
        return pair_dots_strided_fixed<1>(a, lda, b, ldb, prec);
      case 2:
        return pair_dots_strided_fixed<2>(a, lda, b, ldb, prec);
      case 4:
        return pair_dots_strided_fixed<4>(a, lda, b, ldb, prec);
      case 8:
        return pair_dots_strided_fixed<8>(a, lda, b, ldb, prec);
      default:
        break;
    }
  const float* pa[kVW];
  const T* pb[kVW];
  for (int c = 0; c < kVW; ++c) pa[c] = a + size_t(c) * lda, pb[c] = b + size_t(c) * ldb;
  return pair_dots(pa, pb, d, prec);
}

template <typename T>
vf pair_dots(const float* const* a, const T* const* b, int d, Precision prec) {
  if (d % kVW == 0) switch (d / kVW) {
      case 1:
        return pair_dots_fixed<1>(a, b, prec);
      case 2:
        return pair_dots_fixed<2>(a, b, prec);
      case 4:
        return pair_dots_fixed<4>(a, b, prec);
      case 8:
        return pair_dots_fixed<8>(a, b, prec);
      default:
        break;
    }
  vf acc[kVW];
  const int full = d / kVW * kVW;
  for (int c = 0; c < kVW; ++c) {
    vf s = vf{};
    for (int k = 0; k < full; k += kVW) s = fmadd(loadu(a[c] + k), load_row(b[c] + k, prec), s);
    acc[c] = s;
  }
  vf s = reduce_lanes(acc);
  for (int c = 0; c < kVW; ++c)
    for (int k = full; k < d; ++k) s[c] += a[c][k] * load_one(b[c] + k, prec);
  return s;
}

// O[r] = alpha[r] O[r] + sum_t P[t][r] V[key of row r on diagonal t] for one chunk of diagonals.
// Row r's key on diagonal t is key0[t] + r (default positions); an entry outside the keys has
// P = 0 and is skipped, so only kept entries' rows are addressed.
// V rows from v0 (ldv apart), in f32 or 16-bit storage (T).
template <int NV, typename T>
void diagonal_pv_fixed(const KernelContext& c, const T* v0, int64_t ldv, const float* st, int nt,
                       int rows, const int64_t* key0, const float* alpha, float* ot) {
  const uint64_t nk = uint64_t(c.n_k);
  for (int r = 0; r < rows; ++r) {
    float* o = ot + size_t(r) * c.dv;
    vf acc[NV];
    const vf a = splat(alpha[r]);
    for (int v = 0; v < NV; ++v) acc[v] = loadu(o + v * kVW) * a;
    const float* pr = st + r;
    for (int t = 0; t < nt; ++t, pr += kBQ) {
      // Dropped entries have P = 0 (the key test also holds if overflowing scores made P NaN).
      if (*pr == 0.0f || uint64_t(key0[t] + r) >= nk) continue;
      const T* vr = v0 + (key0[t] + r) * ldv;
      const vf pv = splat(*pr);
      for (int v = 0; v < NV; ++v) acc[v] = fmadd(pv, load_row(vr + v * kVW, c.prec), acc[v]);
    }
    for (int v = 0; v < NV; ++v) storeu(o + v * kVW, acc[v]);
  }
}

template <typename T>
void diagonal_pv(const KernelContext& c, const T* v0, int64_t ldv, const float* st, int nt,
                 int rows, const int64_t* key0, const float* alpha, float* ot) {
  bool fixed = false;
  detail::dispatch_rows(
      c.dv / kVW,
      [&](auto nv) {
        diagonal_pv_fixed<decltype(nv)::value>(c, v0, ldv, st, nt, rows, key0, alpha, ot);
        fixed = true;
      },
      std::make_integer_sequence<int, 8>{});
  if (fixed) return;
  const uint64_t nk = uint64_t(c.n_k);
  for (int r = 0; r < rows; ++r) {
    float* o = ot + size_t(r) * c.dv;
    for (int k = 0; k < c.dv; ++k) o[k] *= alpha[r];
    for (int t = 0; t < nt; ++t) {
      const float pr = st[size_t(t) * kBQ + r];
      if (pr == 0.0f || uint64_t(key0[t] + r) >= nk) continue;
      const T* vr = v0 + (key0[t] + r) * ldv;
      for (int k = 0; k < c.dv; ++k) o[k] += pr * load_one(vr + k, c.prec);
    }
  }
}

// Queries i0..i1 (at most kBQ) of head h; T: the storage of K and V (float, or uint16_t for
// bf16 / f16).
template <typename T>
void run_line_tile(KernelContext& c, LineScratch& w, const LineHead& lh, int h, int i0, int i1,
                   int64_t& computed) {
  const bool half = c.half();
  const LineLayout& x = *lh.x;
  const int rows = i1 - i0;
  const float qscale = c.scale * kLog2e;
  QueryTile& t = w.tile;
  t.pack(c, h, i0, rows, qscale);
  const int cols = t.cols;
  for (int r = 0; r < kBQ; ++r) {
    float* q = w.qs.data() + size_t(r) * c.d;
    if (r < rows && half) {
      const uint16_t* src = c.q16_row(h, i0 + r);
      for (int k = 0; k < c.d; ++k) q[k] = widen1(c.prec, src[k]) * qscale;
    } else if (r < rows) {
      const float* src = c.p.q_row(h, i0 + r);
      for (int k = 0; k < c.d; ++k) q[k] = src[k] * qscale;
    } else {
      std::fill_n(q, c.d, 0.0f);
    }
  }
  std::fill_n(w.m, kBQ, kNegInf);
  std::fill_n(w.l, kBQ, 0.0f);
  std::fill(w.ot.begin(), w.ot.end(), 0.0f);
  float* st = w.st.data();

  // Columns: a dense tile over the packed rows; a column past a query's causal limit is -inf.
  const int ncv =
      int(std::lower_bound(x.columns.begin(), x.columns.end(), t.lim_hi) - x.columns.begin());
  for (int c0 = 0; c0 < ncv; c0 += kBK) {
    const int nj = std::min(kBK, ncv - c0);
    if (half)
      qk_any(c, t, lh.kc16.data() + size_t(c0) * c.d, size_t(c.d), nj, st, kBQ);
    else
      qk_tile(lh.kc.data() + size_t(c0) * c.d, size_t(c.d), nj, t.qt.data(), kBQ, cols, c.d, st,
              kBQ);
    for (int j = 0; j < nj; ++j) {
      const int32_t key = x.columns[size_t(c0 + j)];
      if (key < t.lim_lo) continue;
      float* srow = st + size_t(j) * kBQ;
      for (int v = 0; v < cols / kVW; ++v)
        storeu(srow + v * kVW,
               select(splati(key) < t.lim[v], loadu(srow + v * kVW), splat(kNegInf)));
    }
    softmax_step(st, nj, cols, kBQ, true, w.m, w.l, w.alpha);
    if (half)
      pv_any(c, t, st, kBQ, nj, rows, lh.vc16.data() + size_t(c0) * c.dv, size_t(c.dv), w.ot.data(),
             c.dv, w.alpha, false);
    else
      pv_tile(st, kBQ, nj, rows, lh.vc.data() + size_t(c0) * c.dv, size_t(c.dv), c.dv, w.ot.data(),
              c.dv, w.alpha, false);
  }
  computed += int64_t(ncv) * rows;

  // Diagonals: the offsets some query of the tile has a visible key on, o in (min(qp - lim),
  // max qp]; keys outside a query's range, or that are columns (counted there), are -inf.
  const int32_t* qp = c.qpos.data() + i0;
  const int32_t* lim = c.lim.data() + i0;
  int64_t lo = INT64_MAX;
  for (int r = 0; r < rows; ++r) lo = std::min(lo, int64_t(qp[r]) - lim[r]);
  const auto ob = x.offsets.begin();
  const auto first = std::lower_bound(ob, x.offsets.end(), int64_t(qp[rows - 1]), std::greater<>());
  const auto last = std::lower_bound(first, x.offsets.end(), lo, std::greater<>());
  // Default positions: query r's key on diagonal o is qp[0] + r - o, so a vector of queries
  // meets a run of consecutive keys. A run wholly inside every lane's visible keys and free of
  // columns is scored straight from K; the others lane by lane.
  const T* kbase = static_cast<const T*>(k_at(c, h, 0));
  const T* vbase = static_cast<const T*>(v_at(c, h, 0));
  const int64_t ldv = int64_t(v_ld(c));
  const int64_t q0 = qp[0];
  const float* a[kVW];
  const T* b[kVW];
  int64_t key0[kBK];
  for (auto t0 = first; t0 < last; t0 += kBK) {
    const int nt = int(std::min<ptrdiff_t>(kBK, last - t0));
    const int64_t* off = &*t0;
    for (int e = 0; e < nt; ++e) {
      key0[e] = q0 - off[e];
      float* srow = st + size_t(e) * kBQ;
      for (int g = 0; g < cols; g += kVW) {
        const int64_t jb = key0[e] + g;  // lane 0's key
        // lim - qp does not grow along the rows, so the last lane is the tightest.
        if (g + kVW <= rows && jb >= 0 && jb + kVW - 1 < lim[g + kVW - 1] &&
            lh.below[size_t(jb + kVW)] == lh.below[size_t(jb)]) {
          storeu(srow + g, pair_dots_strided(w.qs.data() + size_t(g) * c.d, size_t(c.d),
                                             kbase + size_t(jb) * c.d, size_t(c.d), c.d, c.prec));
          continue;
        }
        vi keep = vi{};
        for (int u = 0; u < kVW; ++u) {
          const int r = g + u;
          const int64_t j = jb + u;
          const bool in =
              r < rows && j >= 0 && j < lim[r] && lh.below[size_t(j) + 1] == lh.below[size_t(j)];
          keep[u] = in ? -1 : 0;
          a[u] = w.qs.data() + size_t(r) * c.d;
          b[u] = kbase + size_t(in ? j : 0) * c.d;
        }
        storeu(srow + g, select(keep, pair_dots(a, b, c.d, c.prec), splat(kNegInf)));
      }
    }
    softmax_step(st, nt, cols, kBQ, true, w.m, w.l, w.alpha);
    diagonal_pv(c, vbase, ldv, st, nt, rows, key0, w.alpha, w.ot.data());
    computed += int64_t(nt) * rows;
  }

  for (int r = 0; r < rows; ++r) {
    const float* acc = w.ot.data() + size_t(r) * c.dv;
    const float inv = w.l[r] > 0.0f ? 1.0f / w.l[r] : 0.0f;
    float* out = c.o + (size_t(h) * c.n_q + i0 + r) * c.d;
    for (int k = 0; k < c.d; ++k) out[k] = acc[k] * inv;
    // Scores were in base 2: lse = (m + log2 l) ln 2.
    c.row_stat[size_t(h) * c.n_q + i0 + r] =
        w.l[r] > 0.0f ? (w.m[r] + std::log2(w.l[r])) * kLn2 : 0.0f;
  }
  // Q, O and the row stat per query; the columns' packed rows and the diagonals' K and V rows.
  const int64_t eb = element_bytes(c.prec);
  c.bytes += int64_t(rows) * (c.d * (eb + 4) + 4) + int64_t(ncv) * (c.d + c.dv) * eb +
             int64_t(last - first) * rows * (c.d + c.dv) * eb;
}

LineHead prepare_head(const KernelContext& c, int h) {
  LineHead lh;
  lh.x = &c.layout.line(h);
  const std::vector<int32_t>& cols = lh.x->columns;
  if (c.half()) {
    lh.kc16.resize(cols.size() * size_t(c.d));
    lh.vc16.resize(cols.size() * size_t(c.dv));
    for (size_t e = 0; e < cols.size(); ++e) {
      std::copy_n(c.k16_row(h, cols[e]), c.d, lh.kc16.data() + e * c.d);
      std::copy_n(c.v16_row(h, cols[e]), c.dv, lh.vc16.data() + e * c.dv);
    }
  } else {
    lh.kc.resize(cols.size() * size_t(c.d));
    lh.vc.resize(cols.size() * size_t(c.dv));
    for (size_t e = 0; e < cols.size(); ++e) {
      std::copy_n(c.p.k_row(h, cols[e]), c.d, lh.kc.data() + e * c.d);
      std::copy_n(c.v_row(h, cols[e]), c.dv, lh.vc.data() + e * c.dv);
    }
  }
  lh.below.assign(size_t(c.n_k) + 1, 0);
  for (int32_t j : cols) lh.below[size_t(j) + 1] = 1;
  for (int j = 0; j < c.n_k; ++j) lh.below[size_t(j) + 1] += lh.below[size_t(j)];
  return lh;
}

}  // namespace lines_impl

void run_lines(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel) {
  using namespace lines_impl;
  std::vector<LineHead> heads(size_t(c.H));
  pool.parallel_for(
      c.H, [&](int64_t h, int) { heads[size_t(h)] = prepare_head(c, int(h)); }, cancel);
  const int tiles = (c.n_q + kBQ - 1) / kBQ;
  std::vector<std::unique_ptr<LineScratch>> scratch(pool.size());
  pool.parallel_for(
      int64_t(c.H) * tiles,
      [&](int64_t item, int wi) {
        if (!scratch[wi]) {
          scratch[wi] = std::make_unique<LineScratch>();
          scratch[wi]->qs.resize(size_t(kBQ) * c.d);
          scratch[wi]->st.resize(size_t(kBK) * kBQ);
          scratch[wi]->ot.resize(size_t(kBQ) * c.dv);
        }
        const int h = int(item / tiles);
        const int i0 = int(item % tiles) * kBQ;
        if (!heads[size_t(h)].x) return;  // cancelled before the head was prepared
        int64_t computed = 0;
        const int i1 = std::min(c.n_q, i0 + kBQ);
        if (c.half())
          run_line_tile<uint16_t>(c, *scratch[wi], heads[size_t(h)], h, i0, i1, computed);
        else
          run_line_tile<float>(c, *scratch[wi], heads[size_t(h)], h, i0, i1, computed);
        c.qk_entries += computed;
        c.pv_entries += computed;
      },
      cancel);
}

}  // namespace attn::cpu::ATTN_CPU_NS
