// Register-blocked micro-kernels for one attention tile, in the transposed-score layout the cpu
// kernels use: St[j][i] holds the score of key j against query i, so the softmax over keys of a
// query is a vertical reduction that vectorises across queries.
//   qk_tile:  St[nj][cols] = K[nj][d] . Qt[d][cols]      (K rows read in place)
//   pv_tile:  O[rows][dv]  = alpha[rows] * O + St^T . V  (V rows read in place; or O = St^T . V)
// cols and dv are multiples of kVW; the caller pads Qt columns and V rows with zeros.
#pragma once
#include <cstddef>
#include <type_traits>
#include <utility>

#include "compute/cpu/simd.h"

namespace attn::cpu::ATTN_CPU_NS {

#if defined(ATTN_CPU_AVX512)
inline constexpr int kMR = 6;  // rows per register block (32 vector registers)
inline constexpr int kNB = 4;  // vectors per register block
#else
inline constexpr int kMR = 6;  // 16 vector registers: 6 x 2 accumulators (4x3, 3x4 measured alike)
inline constexpr int kNB = 2;
#endif

namespace detail {

template <int MR, int NB>
inline void qk_block(const float* K, size_t ldk, const float* Qt, int ldq, int d, float* St,
                     int lds) {
  vf acc[MR][NB];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NB; ++v) acc[r][v] = vf{};
  for (int kk = 0; kk < d; ++kk) {
    vf b[NB];
    for (int v = 0; v < NB; ++v) b[v] = loadu(Qt + size_t(kk) * ldq + v * kVW);
    for (int r = 0; r < MR; ++r) {
      vf a = splat(K[r * ldk + kk]);
      for (int v = 0; v < NB; ++v) acc[r][v] = fmadd(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NB; ++v) storeu(St + size_t(r) * lds + v * kVW, acc[r][v]);
}

template <int MR>
inline void qk_rows(const float* K, size_t ldk, const float* Qt, int ldq, int d, int nvec,
                    float* St, int lds) {
  int v0 = 0;
  for (; v0 + kNB <= nvec; v0 += kNB)
    qk_block<MR, kNB>(K, ldk, Qt + v0 * kVW, ldq, d, St + v0 * kVW, lds);
  const int rest = nvec - v0;
  const float* q = Qt + v0 * kVW;
  float* s = St + v0 * kVW;
  if constexpr (kNB > 1)
    if (rest == 1) qk_block<MR, 1>(K, ldk, q, ldq, d, s, lds);
  if constexpr (kNB > 2)
    if (rest == 2) qk_block<MR, 2>(K, ldk, q, ldq, d, s, lds);
  if constexpr (kNB > 3)
    if (rest == 3) qk_block<MR, 3>(K, ldk, q, ldq, d, s, lds);
}

template <int MR, int NB>
inline void pv_block(const float* Pt, int ldp, int nj, const float* V, size_t ldv, float* O,
                     int ldo, const float* alpha, bool init) {
  vf acc[MR][NB];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NB; ++v) {
      acc[r][v] = init ? vf{} : loadu(O + size_t(r) * ldo + v * kVW);
      if (alpha && !init) acc[r][v] *= alpha[r];
    }
  }
  for (int j = 0; j < nj; ++j) {
    vf b[NB];
    for (int v = 0; v < NB; ++v) b[v] = loadu(V + size_t(j) * ldv + v * kVW);
    const float* p = Pt + size_t(j) * ldp;
    for (int r = 0; r < MR; ++r) {
      vf a = splat(p[r]);
      for (int v = 0; v < NB; ++v) acc[r][v] = fmadd(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NB; ++v) storeu(O + size_t(r) * ldo + v * kVW, acc[r][v]);
}

template <int MR>
inline void pv_rows(const float* Pt, int ldp, int nj, const float* V, size_t ldv, int nvec,
                    float* O, int ldo, const float* alpha, bool init) {
  int v0 = 0;
  for (; v0 + kNB <= nvec; v0 += kNB)
    pv_block<MR, kNB>(Pt, ldp, nj, V + v0 * kVW, ldv, O + v0 * kVW, ldo, alpha, init);
  const int rest = nvec - v0;
  const float* v = V + v0 * kVW;
  float* o = O + v0 * kVW;
  if constexpr (kNB > 1)
    if (rest == 1) pv_block<MR, 1>(Pt, ldp, nj, v, ldv, o, ldo, alpha, init);
  if constexpr (kNB > 2)
    if (rest == 2) pv_block<MR, 2>(Pt, ldp, nj, v, ldv, o, ldo, alpha, init);
  if constexpr (kNB > 3)
    if (rest == 3) pv_block<MR, 3>(Pt, ldp, nj, v, ldv, o, ldo, alpha, init);
}

template <int... R, typename F>
inline void dispatch_rows(int rest, F&& f, std::integer_sequence<int, R...>) {
  ((rest == R + 1 ? f(std::integral_constant<int, R + 1>{}) : void()), ...);
}

}  // namespace detail

// St[j][c] = sum_kk K[j*ldk + kk] * Qt[kk*ldq + c] for j < nj, c < cols (cols % kVW == 0).
inline void qk_tile(const float* K, size_t ldk, int nj, const float* Qt, int ldq, int cols, int d,
                    float* St, int lds) {
  const int nvec = cols / kVW;
  int r0 = 0;
  for (; r0 + kMR <= nj; r0 += kMR)
    detail::qk_rows<kMR>(K + r0 * ldk, ldk, Qt, ldq, d, nvec, St + size_t(r0) * lds, lds);
  detail::dispatch_rows(
      nj - r0,
      [&](auto mr) {
        detail::qk_rows<decltype(mr)::value>(K + r0 * ldk, ldk, Qt, ldq, d, nvec,
                                             St + size_t(r0) * lds, lds);
      },
      std::make_integer_sequence<int, kMR - 1>{});
}

// O[i][c] = alpha[i] * O[i][c] + sum_j Pt[j*ldp + i] * V[j*ldv + c] for i < rows, c < dv
// (dv % kVW == 0); alpha null means 1; `init`: O starts from zero (its contents are not read).
inline void pv_tile(const float* Pt, int ldp, int nj, int rows, const float* V, size_t ldv, int dv,
                    float* O, int ldo, const float* alpha, bool init) {
  const int nvec = dv / kVW;
  int r0 = 0;
  for (; r0 + kMR <= rows; r0 += kMR)
    detail::pv_rows<kMR>(Pt + r0, ldp, nj, V, ldv, nvec, O + size_t(r0) * ldo, ldo,
                         alpha ? alpha + r0 : nullptr, init);
  detail::dispatch_rows(
      rows - r0,
      [&](auto mr) {
        detail::pv_rows<decltype(mr)::value>(Pt + r0, ldp, nj, V, ldv, nvec, O + size_t(r0) * ldo,
                                             ldo, alpha ? alpha + r0 : nullptr, init);
      },
      std::make_integer_sequence<int, kMR - 1>{});
}

}  // namespace attn::cpu::ATTN_CPU_NS
