#include "compute/cpu/dpbf16_tiles.h"

#include <algorithm>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")

namespace attn::cpu::dpbf16 {

namespace {

constexpr int kMR = 6;  // rows of A per register block: 6 x 4 accumulators, 4 B vectors, 1 A

// The u32 at p (a bf16 pair), in every lane.
inline __m512bh pair_at(const uint16_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  return __m512bh(_mm512_set1_epi32(int32_t(x)));
}

// acc[r][v] (+)= sum_{t < pairs} A_r pair t . B[t][16 v ..], A_r at a + r * lda (u16), B u32
// rows ldb apart. `last_lo`: the last pair's A keeps only its low half (an odd key count).
template <int MR, int NB>
inline void block(const uint16_t* a, size_t lda, const uint32_t* b, size_t ldb, int pairs,
                  bool last_lo, __m512 (&acc)[MR][NB]) {
  const int full = last_lo ? pairs - 1 : pairs;
  for (int t = 0; t < full; ++t) {
    __m512bh bv[NB];
    for (int v = 0; v < NB; ++v) bv[v] = __m512bh(_mm512_loadu_si512(b + size_t(t) * ldb + 16 * v));
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = pair_at(a + r * lda + 2 * t);
      for (int v = 0; v < NB; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  if (full < pairs) {
    __m512bh bv[NB];
    for (int v = 0; v < NB; ++v)
      bv[v] = __m512bh(_mm512_loadu_si512(b + size_t(full) * ldb + 16 * v));
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = __m512bh(_mm512_set1_epi32(int32_t(a[r * lda + 2 * full])));
      for (int v = 0; v < NB; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
}

template <int MR, int NB>
void qk_block(const uint16_t* k, size_t ldk, const uint32_t* qp, int ldq, int d, float qscale,
              float* st, int lds, float* colmax) {
  __m512 acc[MR][NB];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NB; ++v) acc[r][v] = _mm512_setzero_ps();
  block<MR, NB>(k, ldk, qp, size_t(ldq), d / 2, false, acc);
  const __m512 s = _mm512_set1_ps(qscale);
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NB; ++v) {
      acc[r][v] = _mm512_mul_ps(acc[r][v], s);
      _mm512_storeu_ps(st + size_t(r) * lds + 16 * v, acc[r][v]);
    }
  if (!colmax) return;
  for (int v = 0; v < NB; ++v) {
    __m512 mx = _mm512_loadu_ps(colmax + 16 * v);
    // (The masked form with a full mask: the plain one trips GCC 12's -Wmaybe-uninitialized.)
    for (int r = 0; r < MR; ++r) mx = _mm512_maskz_max_ps(__mmask16(0xFFFF), mx, acc[r][v]);
    _mm512_storeu_ps(colmax + 16 * v, mx);
  }
}

template <int MR, int NB>
void pv_block(const uint16_t* vt, size_t ldvt, const uint32_t* pp, int ldp, int nj, float* ot,
              int ldo, const float* alpha, bool init) {
  __m512 acc[MR][NB];
  for (int v = 0; v < NB; ++v) {
    const __m512 a = alpha && !init ? _mm512_loadu_ps(alpha + 16 * v) : _mm512_set1_ps(1.0f);
    for (int r = 0; r < MR; ++r)
      acc[r][v] = init ? _mm512_setzero_ps()
                       : _mm512_mul_ps(_mm512_loadu_ps(ot + size_t(r) * ldo + 16 * v), a);
  }
  block<MR, NB>(vt, ldvt, pp, size_t(ldp), (nj + 1) / 2, nj % 2 == 1, acc);
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NB; ++v) _mm512_storeu_ps(ot + size_t(r) * ldo + 16 * v, acc[r][v]);
}

// f(std::integral_constant<int, MR>, std::integral_constant<int, NB>) over rows in blocks of kMR
// and a tail, for NB = nb (1..4) query vectors.
template <int MR, typename F>
void with_nb(int nb, F&& f) {
  switch (nb) {
    case 1:
      return f.template operator()<MR, 1>();
    case 2:
      return f.template operator()<MR, 2>();
    case 3:
      return f.template operator()<MR, 3>();
    default:
      return f.template operator()<MR, 4>();
  }
}

template <typename F>
void over_rows(int n, int nb, F&& f) {
  int r0 = 0;
  for (; r0 + kMR <= n; r0 += kMR)
    with_nb<kMR>(nb, [&]<int MR, int NB>() { f.template operator()<MR, NB>(r0); });
  switch (n - r0) {
    case 1:
      return with_nb<1>(nb, [&]<int MR, int NB>() { f.template operator()<MR, NB>(r0); });
    case 2:
      return with_nb<2>(nb, [&]<int MR, int NB>() { f.template operator()<MR, NB>(r0); });
    case 3:
      return with_nb<3>(nb, [&]<int MR, int NB>() { f.template operator()<MR, NB>(r0); });
    case 4:
      return with_nb<4>(nb, [&]<int MR, int NB>() { f.template operator()<MR, NB>(r0); });
    case 5:
      return with_nb<5>(nb, [&]<int MR, int NB>() { f.template operator()<MR, NB>(r0); });
    default:
      return;
  }
}

}  // namespace

void qk(const uint16_t* k, size_t ldk, int nj, const uint32_t* qp, int ldq, int cols, int d,
        float qscale, float* st, int lds, float* colmax) {
  const int qb = (cols + 15) / 16;
  // Query vectors in groups of four (a tile has at most kBQ = 64 queries).
  for (int v0 = 0; v0 < qb; v0 += 4)
    over_rows(nj, std::min(4, qb - v0), [&]<int MR, int NB>(int r0) {
      qk_block<MR, NB>(k + size_t(r0) * ldk, ldk, qp + 16 * v0, ldq, d, qscale,
                       st + size_t(r0) * lds + 16 * v0, lds, colmax ? colmax + 16 * v0 : nullptr);
    });
}

void pack_pairs(const float* st, int lds, int nj, int cols, int pairs, uint32_t* pp, int ldp) {
  const int qb = (cols + 15) / 16;
  alignas(64) static const uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                       21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                       11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i perm = _mm512_load_si512(kInterleave);
  for (int r = 0; r < pairs; ++r) {
    const int j = 2 * r;
    for (int v = 0; v < qb; ++v) {
      const __m512 a =
          j < nj ? _mm512_loadu_ps(st + size_t(j) * lds + v * 16) : _mm512_setzero_ps();
      const __m512 b =
          j + 1 < nj ? _mm512_loadu_ps(st + size_t(j + 1) * lds + v * 16) : _mm512_setzero_ps();
      const __m512i x = __m512i(_mm512_cvtne2ps_pbh(b, a));
      _mm512_storeu_si512(pp + size_t(r) * ldp + v * 16, _mm512_permutexvar_epi16(perm, x));
    }
  }
}

void pv(const float* st, int lds, int nj, int cols, const uint16_t* vt, size_t ldvt, int dv,
        float* ot, int ldo, const float* alpha, bool init, uint32_t* pp, int ldp) {
  const int qb = (cols + 15) / 16;
  pack_pairs(st, lds, nj, cols, (nj + 1) / 2, pp, ldp);
  for (int v0 = 0; v0 < qb; v0 += 4)
    over_rows(dv, std::min(4, qb - v0), [&]<int MR, int NB>(int e0) {
      pv_block<MR, NB>(vt + size_t(e0) * ldvt, ldvt, pp + 16 * v0, ldp, nj,
                       ot + size_t(e0) * ldo + 16 * v0, ldo, alpha ? alpha + 16 * v0 : nullptr,
                       init);
    });
}

}  // namespace attn::cpu::dpbf16

#pragma GCC pop_options

#else

namespace attn::cpu::dpbf16 {
void qk(const uint16_t*, size_t, int, const uint32_t*, int, int, int, float, float*, int, float*) {}
void pv(const float*, int, int, int, const uint16_t*, size_t, int, float*, int, const float*, bool,
        uint32_t*, int) {}
void pack_pairs(const float*, int, int, int, int, uint32_t*, int) {}
}  // namespace attn::cpu::dpbf16

#endif
