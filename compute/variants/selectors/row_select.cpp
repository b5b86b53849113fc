#include "compute/variants/selectors/row_select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace attn::detail {

namespace {

// Unsigned key ordered as the float is (-0 and +0 equal, as they compare).
inline uint32_t order_key(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (x == 0.0f) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Appends the keys j in [j0, nv) with score[j] >= thr to cand[n..] and their order keys to
// key[n..] (index order); both hold nv + 16 entries. Returns the new count.
int collect_portable(const float* score, int j0, int nv, float thr, int32_t* cand, uint32_t* key,
                     int n) {
  for (int j = j0; j < nv; ++j) {
    cand[n] = j;
    key[n] = order_key(score[j]);
    n += score[j] >= thr;
  }
  return n;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_ROW_SELECT_AVX512 1
// GCC 12 warns inside its own AVX-512 intrinsics' headers (a known false positive).
#pragma GCC diagnostic push
#if !defined(__clang__)  // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Sixteen compares at once; the passing keys and their order keys compressed into place (whole
// vectors stored: the arrays have 16 entries of slack).
__attribute__((target("avx512f"))) int collect_avx512(const float* score, int nv, float thr,
                                                      int32_t* cand, uint32_t* key) {
  const __m512 t = _mm512_set1_ps(thr);
  const __m512i sign = _mm512_set1_epi32(int(0x80000000u));
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int n = 0, j = 0;
  for (; j + 16 <= nv; j += 16) {
    const __m512 x = _mm512_loadu_ps(score + j);
    const __mmask16 m = _mm512_cmp_ps_mask(x, t, _CMP_GE_OQ);
    if (m) {
      // order_key: +-0 as 0, then all bits of negatives flipped, the sign bit of the rest.
      __m512i u = _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_UQ),
                                         _mm512_castps_si512(x));
      u = _mm512_xor_si512(u, _mm512_or_si512(_mm512_srai_epi32(u, 31), sign));
      _mm512_storeu_si512(cand + n, _mm512_maskz_compress_epi32(m, idx));
      _mm512_storeu_si512(key + n, _mm512_maskz_compress_epi32(m, u));
      n += __builtin_popcount(unsigned(m));
    }
    idx = _mm512_add_epi32(idx, _mm512_set1_epi32(16));
  }
  return collect_portable(score, j, nv, thr, cand, key, n);
}
#pragma GCC diagnostic pop
#endif

int collect(const float* score, int nv, float thr, int32_t* cand, uint32_t* key) {
#ifdef ATTN_ROW_SELECT_AVX512
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return collect_avx512(score, nv, thr, cand, key);
#endif
  return collect_portable(score, 0, nv, thr, cand, key, 0);
}

}  // namespace

// A strided sample of the row gives a threshold a little below the k-th
// score; one vectorised pass collects the keys at or above it (in index order) with their
// order-preserving integer keys, and the exact k-th score is found among those candidates alone:
// one histogram over the candidates' key range, then a selection inside the one bucket that holds
// it. One compare per key plus O(k) work, instead of a selection over every key.
void top_keys(const float* score, int nv, int k, RowScratch& sc, int32_t* out) {
  const int take = std::min(k, nv);
  if (take >= nv) {
    for (int j = 0; j < nv; ++j) out[j] = j;
    return;
  }
  float thr = -INFINITY;
  constexpr int kStride = 16;
  const int ns = nv / kStride;
  // Rank in the sample of a threshold expected to let ~1.25 take + 64 keys through.
  const int r = int((double(take) * 1.25 + 64) / kStride);
  if (ns >= 64 && r < ns) {
    sc.sample.resize(size_t(ns));
    for (int t = 0; t < ns; ++t) sc.sample[size_t(t)] = score[size_t(t) * kStride + kStride / 2];
    std::nth_element(sc.sample.begin(), sc.sample.begin() + r, sc.sample.end(),
                     std::greater<float>());
    thr = sc.sample[size_t(r)];
  }
  if (sc.cand.size() < size_t(nv) + 16) {
    sc.cand.resize(size_t(nv) + 16);
    sc.key.resize(size_t(nv) + 16);
  }
  int n = collect(score, nv, thr, sc.cand.data(), sc.key.data());
  if (n < take) {  // the sample misjudged the row (or NaNs): every key is a candidate
    for (int j = 0; j < nv; ++j) sc.cand[size_t(j)] = j, sc.key[size_t(j)] = order_key(score[j]);
    n = nv;
  }
  // The take-th largest key: a histogram over the candidates' key range finds its bucket, and a
  // selection among that bucket's few keys the key itself.
  uint32_t lo = UINT32_MAX, hi = 0;
  for (int c = 0; c < n; ++c)
    lo = std::min(lo, sc.key[size_t(c)]), hi = std::max(hi, sc.key[size_t(c)]);
  constexpr int kBins = 1024;
  int shift = 0;
  while (((hi - lo) >> shift) >= uint32_t(kBins)) ++shift;
  uint32_t hist[kBins] = {};
  for (int c = 0; c < n; ++c) ++hist[(sc.key[size_t(c)] - lo) >> shift];
  int need = take;  // rank, from the top, inside bucket b
  int b = kBins - 1;
  while (need > int(hist[b])) need -= int(hist[b--]);
  sc.bucket.clear();
  for (int c = 0; c < n; ++c)
    if (((sc.key[size_t(c)] - lo) >> shift) == uint32_t(b)) sc.bucket.push_back(sc.key[size_t(c)]);
  std::nth_element(sc.bucket.begin(), sc.bucket.begin() + (need - 1), sc.bucket.end(),
                   std::greater<uint32_t>());
  const uint32_t kth = sc.bucket[size_t(need) - 1];
  // Keys equal to the k-th taken: those of the top `need` in the bucket that equal it.
  int equal = 0;
  for (int c = 0; c < need; ++c) equal += sc.bucket[size_t(c)] == kth;
  // Every score above the k-th, and the first `equal` equal to it (the lower indices).
  // Compacted in place (w <= c), then copied: out holds exactly take keys.
  int w = 0;
  for (int c = 0; c < n; ++c) {
    const uint32_t x = sc.key[size_t(c)];
    const bool eq = x == kth, in = x > kth || (eq && equal > 0);
    sc.cand[size_t(w)] = sc.cand[size_t(c)];
    w += in;
    equal -= int(eq && in);
  }
  std::copy_n(sc.cand.begin(), take, out);
}

int keys_at_or_above(const float* score, int nv, float thr, int32_t* cand, RowScratch& sc) {
  if (sc.key.size() < size_t(nv) + 16) sc.key.resize(size_t(nv) + 16);
  return collect(score, nv, thr, cand, sc.key.data());
}

}  // namespace attn::detail
