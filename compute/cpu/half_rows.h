// Q, K and V stored in 16 bits (KernelContext::prec = bf16 or f16): converting a problem's f32
// rows into that storage once per execute (round to nearest even: vcvtneps2bf16 / vcvtps2ph
// where the CPU has them, else compute/kv/kv_precision.h's round_bf16 / round_fp16), and
// reading it back: kVW values widened to f32 in registers (a shift for bf16, vcvtph2ps for f16),
// or rows widened into an f32 tile that the f32 micro-kernels then use.
#pragma once
#include <cstdint>
#include <cstring>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/simd.h"
#include "compute/cpu/thread_pool.h"
#include "compute/half_bits.h"

namespace attn::cpu::ATTN_CPU_NS {

// kVW bf16 values from p, as floats (exact).
inline vf widen_bf16(const uint16_t* p) {
#if defined(ATTN_CPU_AVX512)
  // Masked forms with a full mask (GCC folds them): the plain ones trip GCC 12's
  // -Wmaybe-uninitialized inside its headers.
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return vf(_mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(__mmask16(0xFFFF), _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16)));
#elif defined(ATTN_CPU_AVX2)
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return vf(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
#else
  vi r;
  for (int i = 0; i < kVW; ++i) r[i] = int32_t(uint32_t(p[i]) << 16);
  return as_float(r);
#endif
}

// 2 kVW bf16 values from p as two float vectors: the even-indexed ones (lo) and the odd ones
// (hi), one shift and one mask on a single load (cheaper than widening in order).
inline void widen_bf16_pairs(const uint16_t* p, vf& lo, vf& hi) {
#if defined(ATTN_CPU_AVX512)
  const __m512i u = _mm512_loadu_si512(p);
  lo = vf(_mm512_castsi512_ps(_mm512_maskz_slli_epi32(__mmask16(0xFFFF), u, 16)));
  hi = vf(_mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32(int32_t(0xFFFF0000u)))));
#elif defined(ATTN_CPU_AVX2)
  const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  lo = vf(_mm256_castsi256_ps(_mm256_slli_epi32(u, 16)));
  hi = vf(_mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(int32_t(0xFFFF0000u)))));
#else
  vi u;
  std::memcpy(&u, p, sizeof u);
  lo = as_float(u << 16);
  hi = as_float(u & splati(int32_t(0xFFFF0000u)));
#endif
}

// Pair order: within each block of 2 kVW values, the even-indexed ones, then the odd ones (the
// order widen_bf16_pairs yields). In place over x[0..n), n % (2 kVW) == 0.
inline void to_pair_order(float* x, int n) {
  for (int b = 0; b < n; b += 2 * kVW) {
    float t[2 * kVW];
    for (int i = 0; i < kVW; ++i) t[i] = x[b + 2 * i], t[kVW + i] = x[b + 2 * i + 1];
    std::memcpy(x + b, t, sizeof t);
  }
}
inline void from_pair_order(float* x, int n) {
  for (int b = 0; b < n; b += 2 * kVW) {
    float t[2 * kVW];
    for (int i = 0; i < kVW; ++i) t[2 * i] = x[b + i], t[2 * i + 1] = x[b + kVW + i];
    std::memcpy(x + b, t, sizeof t);
  }
}

// kVW f16 values from p, as floats (exact).
inline vf widen_f16(const uint16_t* p) {
#if defined(ATTN_CPU_AVX512)
  // The masked form: the plain one trips GCC 12's -Wmaybe-uninitialized inside the header.
  return vf(_mm512_mask_cvtph_ps(_mm512_setzero_ps(), __mmask16(0xFFFF),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#elif defined(ATTN_CPU_AVX2) && defined(__F16C__)
  return vf(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  vf r;
  for (int i = 0; i < kVW; ++i) r[i] = f16_bits_to_float(p[i]);
  return r;
#endif
}

inline vf widen(Precision prec, const uint16_t* p) {
  return prec == Precision::Bf16 ? widen_bf16(p) : widen_f16(p);
}

// kVW values of a row in f32 or 16-bit storage, as floats (kernels templated on the storage).
inline vf load_row(const float* p, Precision) {
  return loadu(p);
}
inline vf load_row(const uint16_t* p, Precision prec) {
  return widen(prec, p);
}

// One stored value as a float.
inline float widen1(Precision prec, uint16_t x) {
  return prec == Precision::Bf16 ? bf16_bits_to_float(x) : f16_bits_to_float(x);
}

inline float load_one(const float* p, Precision) {
  return *p;
}
inline float load_one(const uint16_t* p, Precision prec) {
  return widen1(prec, *p);
}

// dst[r][0..n) = src[r][0..n) widened, for r < rows.
void widen_rows(Precision prec, const uint16_t* src, size_t lds, int rows, int n, float* dst,
                size_t ldd);

// Fills c.q16, c.k16 and c.v16 (or c.vt16 with bf16 tiles) from the problem, in parallel; `hw_bf16`
// (null: round_bf16 per value) converts a run of floats to bf16 in hardware. Throws
// Error(InvalidArgument) when a value is beyond f16's range in f16.
void convert_inputs(KernelContext& c, ThreadPool& pool,
                    void (*hw_bf16)(const float*, uint16_t*, size_t));

}  // namespace attn::cpu::ATTN_CPU_NS
