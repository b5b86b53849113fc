// Internal to compute/kv/kv_kernels.cpp: a 16-lane float vector and the few operations the KV
// decode kernel needs, in two forms with the same lane-by-lane arithmetic: one AVX-512 register
// (KV_AVX512, inside kv_kernels_avx512.cpp's target region) or a pair of 8-lane vectors (the
// baseline: two AVX2 registers on x86-64-v3, SSE pairs on older targets). Every operation works
// lane by lane (rounded as IEEE says), fused multiply-adds are explicit, reductions follow one
// fixed tree, and conversions are exact, so both forms give the same bits.
//
// Include it inside the kernel's ISA namespace, after <immintrin.h> and compute/half_bits.h.
#pragma once

#define KV_INLINE inline __attribute__((always_inline))

constexpr int W = 16;  // lanes

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef float V4 __attribute__((vector_size(16)));
typedef float V2 __attribute__((vector_size(8)));
typedef uint16_t H16 __attribute__((vector_size(32)));  // 16 halves
typedef uint8_t B16 __attribute__((vector_size(16)));   // 16 bytes

// Tree sums and maxima of 8 lanes: lane i + lane i + 4, then i + 2, then i + 1.
KV_INLINE float reduce8(const V8& a) {
  const V4 b =
      __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const V2 c = __builtin_shufflevector(b, b, 0, 1) + __builtin_shufflevector(b, b, 2, 3);
  return c[0] + c[1];
}
KV_INLINE float reduce_max8(const V8& a) {
  const V4 x = __builtin_shufflevector(a, a, 0, 1, 2, 3),
           y = __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const V4 b = x > y ? x : y;
  const V2 u = __builtin_shufflevector(b, b, 0, 1), v = __builtin_shufflevector(b, b, 2, 3);
  const V2 c = u > v ? u : v;
  return c[0] > c[1] ? c[0] : c[1];
}

// The lane indices 0 .. 7.
constexpr I8 kLane8 = {0, 1, 2, 3, 4, 5, 6, 7};

#if defined(KV_AVX512)

typedef float V16 __attribute__((vector_size(64)));
typedef int32_t M16 __attribute__((vector_size(64)));  // lane masks: -1 or 0

KV_INLINE V16 splat(float x) {
  return V16(_mm512_set1_ps(x));
}
KV_INLINE V16 load(const float* p) {
  return V16(_mm512_loadu_ps(p));
}
KV_INLINE void store(float* p, const V16& v) {
  _mm512_storeu_ps(p, __m512(v));
}
KV_INLINE V16 fmadd(const V16& a, const V16& b, const V16& c) {
  return V16(_mm512_fmadd_ps(__m512(a), __m512(b), __m512(c)));
}
KV_INLINE V16 vmax(const V16& a, const V16& b) {
  return a > b ? a : b;
}
KV_INLINE M16 less(const V16& a, const V16& b) {
  return a < b;
}
KV_INLINE M16 equal(const V16& a, const V16& b) {
  return a == b;
}
KV_INLINE M16 either(const M16& a, const M16& b) {
  return a | b;
}
KV_INLINE V16 select(const M16& m, const V16& a, const V16& b) {
  return m ? a : b;
}
// Lanes below n set.
KV_INLINE M16 lanes_below(int n) {
  constexpr M16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return lane < n;
}
// Lanes whose byte of m is non-zero set.
KV_INLINE M16 bytes_set(const B16& m) {
  return __builtin_convertvector(m != 0, M16);
}
KV_INLINE float reduce(const V16& v) {
  return reduce8(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
}
KV_INLINE float reduce_max(const V16& v) {
  const V8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
           b = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  return reduce_max8(a > b ? a : b);
}
// 2^n for integer-valued n in [-126, 127].
KV_INLINE V16 pow2i(const V16& n) {
  return V16((__builtin_convertvector(n, M16) + 127) << 23);
}
// The maskz forms below: GCC 12 warns about the undefined source of the plain ones.
KV_INLINE V16 bytes_to_float(const B16& b) {
  const __mmask16 all = 0xFFFF;
  return V16(_mm512_maskz_cvtepi32_ps(all, _mm512_maskz_cvtepu8_epi32(all, __m128i(b))));
}
KV_INLINE V16 halves_f16(const H16& h) {
  return V16(_mm512_maskz_cvtph_ps(__mmask16(0xFFFF), __m256i(h)));
}
KV_INLINE V16 halves_bf16(const H16& h) {
  typedef uint32_t U16 __attribute__((vector_size(64)));
  return V16(__builtin_convertvector(h, U16) << 16);
}

#else  // a pair of 8-lane vectors

struct V16 {
  V8 lo, hi;
};
struct M16 {
  I8 lo, hi;
};

KV_INLINE V16 operator+(const V16& a, const V16& b) {
  return {a.lo + b.lo, a.hi + b.hi};
}
KV_INLINE V16 operator-(const V16& a, const V16& b) {
  return {a.lo - b.lo, a.hi - b.hi};
}
KV_INLINE V16 operator*(const V16& a, const V16& b) {
  return {a.lo * b.lo, a.hi * b.hi};
}
KV_INLINE V16 operator-(const V16& a) {
  return {-a.lo, -a.hi};
}
KV_INLINE V16& operator+=(V16& a, const V16& b) {
  return a = a + b;
}
KV_INLINE V16 splat(float x) {
  const V8 v = V8{} + x;
  return {v, v};
}
KV_INLINE V16 load(const float* p) {
  V16 v;
  std::memcpy(&v.lo, p, 32);
  std::memcpy(&v.hi, p + 8, 32);
  return v;
}
KV_INLINE void store(float* p, const V16& v) {
  std::memcpy(p, &v.lo, 32);
  std::memcpy(p + 8, &v.hi, 32);
}
KV_INLINE V8 fmadd8(const V8& a, const V8& b, const V8& c) {
#if defined(__FMA__)
  return V8(_mm256_fmadd_ps(__m256(a), __m256(b), __m256(c)));
#else
  V8 r;
  for (int i = 0; i < 8; ++i) r[i] = std::fma(a[i], b[i], c[i]);
  return r;
#endif
}
KV_INLINE V16 fmadd(const V16& a, const V16& b, const V16& c) {
  return {fmadd8(a.lo, b.lo, c.lo), fmadd8(a.hi, b.hi, c.hi)};
}
KV_INLINE V16 vmax(const V16& a, const V16& b) {
  return {a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
}
KV_INLINE M16 less(const V16& a, const V16& b) {
  return {a.lo < b.lo, a.hi < b.hi};
}
KV_INLINE M16 equal(const V16& a, const V16& b) {
  return {a.lo == b.lo, a.hi == b.hi};
}
KV_INLINE M16 either(const M16& a, const M16& b) {
  return {a.lo | b.lo, a.hi | b.hi};
}
KV_INLINE V16 select(const M16& m, const V16& a, const V16& b) {
  return {m.lo ? a.lo : b.lo, m.hi ? a.hi : b.hi};
}
KV_INLINE M16 lanes_below(int n) {
  return {kLane8 < n, kLane8 + 8 < n};
}
KV_INLINE M16 bytes_set(const B16& m) {
  typedef uint8_t B8 __attribute__((vector_size(8)));
  const B8 lo = __builtin_shufflevector(m, m, 0, 1, 2, 3, 4, 5, 6, 7),
           hi = __builtin_shufflevector(m, m, 8, 9, 10, 11, 12, 13, 14, 15);
  return {__builtin_convertvector(lo != 0, I8), __builtin_convertvector(hi != 0, I8)};
}
KV_INLINE float reduce(const V16& v) {
  return reduce8(v.lo + v.hi);
}
KV_INLINE float reduce_max(const V16& v) {
  return reduce_max8(v.lo > v.hi ? v.lo : v.hi);
}
KV_INLINE V8 pow2i8(const V8& n) {
  const I8 e = (__builtin_convertvector(n, I8) + 127) << 23;
  return V8(e);
}
KV_INLINE V16 pow2i(const V16& n) {
  return {pow2i8(n.lo), pow2i8(n.hi)};
}
KV_INLINE V16 bytes_to_float(const B16& b) {
#if defined(__AVX2__)
  const __m128i x = __m128i(b);
  return {V8(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x))),
          V8(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(x, 8))))};
#else
  typedef uint8_t B8 __attribute__((vector_size(8)));
  return {
      __builtin_convertvector(B8(__builtin_shufflevector(b, b, 0, 1, 2, 3, 4, 5, 6, 7)), V8),
      __builtin_convertvector(B8(__builtin_shufflevector(b, b, 8, 9, 10, 11, 12, 13, 14, 15)), V8)};
#endif
}
KV_INLINE V16 halves_f16(const H16& h) {
#if defined(__F16C__)
  const __m256i x = __m256i(h);
  return {V8(_mm256_cvtph_ps(_mm256_castsi256_si128(x))),
          V8(_mm256_cvtph_ps(_mm256_extracti128_si256(x, 1)))};
#else
  float f[W];
  for (int i = 0; i < W; ++i) f[i] = f16_bits_to_float(h[i]);  // compute/half_bits.h
  return load(f);
#endif
}
KV_INLINE V16 halves_bf16(const H16& h) {
  typedef uint16_t H8 __attribute__((vector_size(16)));
  typedef uint32_t U8 __attribute__((vector_size(32)));
  const H8 lo = __builtin_shufflevector(h, h, 0, 1, 2, 3, 4, 5, 6, 7),
           hi = __builtin_shufflevector(h, h, 8, 9, 10, 11, 12, 13, 14, 15);
  return {V8(__builtin_convertvector(lo, U8) << 16), V8(__builtin_convertvector(hi, U8) << 16)};
}

#endif

// ---- shared by both forms ----

// n (< 16) floats, zeros after.
KV_INLINE V16 load_part(const float* p, int n) {
  float f[W] = {};
  std::memcpy(f, p, size_t(n) * 4);
  return load(f);
}
KV_INLINE V16 load_n(const float* p, int n) {
  return n == W ? load(p) : load_part(p, n);
}
KV_INLINE void store_n(float* p, const V16& v, int n) {
  if (n == W) {
    store(p, v);
    return;
  }
  float f[W];
  store(f, v);
  std::memcpy(p, f, size_t(n) * 4);
}
// Lanes n .. 15 set to zero.
KV_INLINE V16 keep_first(const V16& v, int n) {
  return select(lanes_below(n), v, splat(0));
}

// N bytes (4, 8 or 16: one load into a register), zeros after.
template <int N>
KV_INLINE B16 load_bytes(const uint8_t* p) {
#if defined(__SSE2__)
  if constexpr (N == 16) {
    return B16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (N == 8) {
    return B16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (N == 4) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return B16(_mm_cvtsi32_si128(v));
  }
#endif
  B16 b = {};
  std::memcpy(&b, p, N);
  return b;
}
// n (< 16) bytes, zeros after: the tail of a row.
KV_INLINE B16 load_bytes_part(const uint8_t* p, int n) {
  B16 b = {};
  std::memcpy(&b, p, size_t(n));
  return b;
}
// 16 16-bit values, or n (< 16) of them and zeros.
KV_INLINE H16 load_halves(const uint8_t* p, int n) {
  H16 h = {};
  if (n == W)
    std::memcpy(&h, p, 32);
  else
    std::memcpy(&h, p, size_t(n) * 2);
  return h;
}
// 16 bytes widened to 16 bits.
KV_INLINE H16 bytes_to_halves(const B16& b) {
#if defined(__AVX2__) || defined(KV_AVX512)
  return H16(_mm256_cvtepu8_epi16(__m128i(b)));
#else
  return __builtin_convertvector(b, H16);
#endif
}

// exp(x) for the x <= 0 of a softmax (x = score - max), 0 below -87: 2^n e^r with
// |r| <= ln2 / 2 and a degree-7 Taylor polynomial, about 2 ulp.
KV_INLINE V16 exp_neg(const V16& x0) {
  const M16 dead = less(x0, splat(-87.0f));
  const V16 x = select(dead, splat(-87.0f), x0);
  const V16 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V16 n = (x * splat(1.44269504f) + magic) - magic;
  const V16 r = fmadd(n, splat(2.12194440e-4f), fmadd(n, splat(-0.693359375f), x));
  V16 e = splat(1.0f / 5040);
  for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    e = fmadd(e, r, splat(c));
  return select(dead, splat(0), e * pow2i(n));
}
