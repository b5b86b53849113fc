// Portable SIMD for the cpu kernels: GCC/Clang vector extensions sized to the widest vector the
// build targets (AVX-512: 16 floats, AVX2: 8, else 4), plus the few math functions the kernels
// need. Only fused multiply-add and broadcast use intrinsics: ISO C++ mode disables contraction,
// and vf{} + x costs an add.
//
// Everything here and in the headers built on it (tile_kernels.h, score_tile.h, tile_plan.h and
// the kernels) lives in a namespace named for the instruction set, ATTN_CPU_NS, so one binary can
// hold the kernels twice: for the build's baseline and, from isa_avx512.cpp, for AVX-512.
#pragma once
// The helpers below pass vectors wider than the baseline's registers by value (e.g. 8 doubles
// under AVX2); they are inline and never cross an ABI boundary, so GCC's note is noise.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

// ATTN_CPU_ISA_AVX512 is defined by isa_avx512.cpp inside its target("avx512...") region.
#if defined(ATTN_CPU_ISA_AVX512) || defined(__AVX512F__)
#define ATTN_CPU_AVX512 1
#define ATTN_CPU_NS isa_avx512
#define ATTN_CPU_ISA_NAME "avx512"
#define ATTN_CPU_WIDTH 16
#elif defined(__AVX2__) && defined(__FMA__)
#define ATTN_CPU_AVX2 1
#define ATTN_CPU_NS isa_avx2
#define ATTN_CPU_ISA_NAME "avx2"
#define ATTN_CPU_WIDTH 8
#else
#define ATTN_CPU_NS isa_generic
#define ATTN_CPU_ISA_NAME "generic"
#define ATTN_CPU_WIDTH 4
#endif

namespace attn::cpu::ATTN_CPU_NS {

inline constexpr int kVW = ATTN_CPU_WIDTH;
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

typedef float vf __attribute__((vector_size(kVW * 4)));    // kVW floats
typedef int32_t vi __attribute__((vector_size(kVW * 4)));  // kVW int32 (comparison masks)

// Unaligned, aliasing-safe view for loads and stores.
typedef float vf_unaligned __attribute__((vector_size(kVW * 4), aligned(4), may_alias));

inline vf loadu(const float* p) {
  return *reinterpret_cast<const vf_unaligned*>(p);
}
inline void storeu(float* p, vf v) {
  *reinterpret_cast<vf_unaligned*>(p) = v;
}
// Broadcasts (vf{} + x would cost an add: 0 + x is not an identity for -0).
inline vf splat(float x) {
#if defined(ATTN_CPU_AVX512)
  return vf(_mm512_set1_ps(x));
#elif defined(ATTN_CPU_AVX2)
  return vf(_mm256_set1_ps(x));
#else
  vf r;
  for (int i = 0; i < kVW; ++i) r[i] = x;
  return r;
#endif
}
inline vi splati(int32_t x) {
  return vi{} + x;  // one broadcast (a per-lane loop compiles to kVW inserts)
}
inline vi as_int(vf v) {
  vi r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
inline vf as_float(vi v) {
  vf r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}
inline vf select(vi mask, vf a, vf b) {
  return mask ? a : b;
}  // mask lanes are 0 or -1
inline vf vmax(vf a, vf b) {
  return a > b ? a : b;
}
inline vf vmin(vf a, vf b) {
  return a < b ? a : b;
}

// a * b + c, fused where the target has FMA.
inline vf fmadd(vf a, vf b, vf c) {
#if defined(ATTN_CPU_AVX512)
  return vf(_mm512_fmadd_ps(__m512(a), __m512(b), __m512(c)));
#elif defined(ATTN_CPU_AVX2)
  return vf(_mm256_fmadd_ps(__m256(a), __m256(b), __m256(c)));
#else
  return a * b + c;
#endif
}

inline float hmax(vf v) {
  float m = v[0];
  for (int i = 1; i < kVW; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
inline float hsum(vf v) {
  float s = 0;
  for (int i = 0; i < kVW; ++i) s += v[i];
  return s;
}

// 2^x for x <= 0 with no -inf among the inputs (relative error ~1e-7; x < -125 gives a value
// below 2^-124, not 0). The softmax hot path on unmasked tiles.
inline vf exp2v_nonpos(vf x) {
  x = vmax(x, splat(-125.0f));
  // Round to nearest integer with the 1.5 * 2^23 trick; f in [-0.5, 0.5].
  const vf magic = splat(12582912.0f);
  vf t = x + magic;
  vi n = as_int(t) - as_int(magic);
  vf f = x - (t - magic);
  // Taylor series of e^(f ln 2) to degree 7 (truncation error < 1e-8 on |f| <= 0.5).
  vf p = splat(1.5252733804059840e-05f);            // ln2^7 / 7!
  p = fmadd(p, f, splat(1.5403530393381608e-04f));  // ln2^6 / 6!
  p = fmadd(p, f, splat(1.3333558146428443e-03f));  // ln2^5 / 5!
  p = fmadd(p, f, splat(9.6181291076284772e-03f));  // ln2^4 / 4!
  p = fmadd(p, f, splat(5.5504108664821580e-02f));  // ln2^3 / 3!
  p = fmadd(p, f, splat(2.4022650695910071e-01f));  // ln2^2 / 2!
  p = fmadd(p, f, splat(6.9314718055994531e-01f));  // ln2
  p = fmadd(p, f, splat(1.0f));
  return as_float(as_int(p) + (n << 23));
}

// 2^x, relative error ~1e-7; exactly 0 for x < -125 (so -inf, a dropped entry, gives 0);
// clamped at 2^127.
inline vf exp2v(vf x) {
  vi under = x < splat(-125.0f);
  vf r = exp2v_nonpos(vmin(x, splat(127.0f)));
  return select(under, splat(0.0f), r);
}

namespace detail {

// Shuffle index for one level of reduce_lanes: inputs hold W / g keys each, g lanes per key;
// output lane L holds half of key group L / (g / 2)'s pair of lanes (`high` picks the upper one).
constexpr int fold_index(int W, int g, int L, bool high) {
  const int h = g / 2, group = L / h, off = L % h, per_input = W / g;
  const int base = group < per_input ? 0 : W;
  return base + (group % per_input) * g + off + (high ? h : 0);
}

template <int g, int... L>
inline vf fold(vf x, vf y, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(x, y, fold_index(kVW, g, L, false)...) +
         __builtin_shufflevector(x, y, fold_index(kVW, g, L, true)...);
}

template <int g>
inline void fold_level(vf* v, int n) {
  for (int i = 0; i < n / 2; ++i)
    v[i] = fold<g>(v[2 * i], v[2 * i + 1], std::make_integer_sequence<int, kVW>{});
  if constexpr (g > 2) fold_level<g / 2>(v, n / 2);
}

}  // namespace detail

namespace detail {

// One stage of an in-register transpose: rows i and i + h swap their off-diagonal h x h blocks.
constexpr int swap_lo(int l, int h) {
  return (l & h) ? kVW + (l - h) : l;
}
constexpr int swap_hi(int l, int h) {
  return (l & h) ? kVW + l : l + h;
}

template <int h, int... L>
inline void transpose_stage(vf* r, std::integer_sequence<int, L...>) {
  for (int i = 0; i < kVW; ++i) {
    if (i & h) continue;
    const vf a = r[i], b = r[i + h];
    r[i] = __builtin_shufflevector(a, b, swap_lo(L, h)...);
    r[i + h] = __builtin_shufflevector(a, b, swap_hi(L, h)...);
  }
  if constexpr (h > 1) transpose_stage<h / 2>(r, std::integer_sequence<int, L...>{});
}

}  // namespace detail

// Transposes the kVW x kVW matrix held in r[0..kVW) (row i = r[i]) in place.
inline void transpose(vf* r) {
  detail::transpose_stage<kVW / 2>(r, std::make_integer_sequence<int, kVW>{});
}

typedef double vd __attribute__((vector_size(kVW * 8)));  // kVW doubles

inline vd to_double(vf v) {
  return __builtin_convertvector(v, vd);
}
inline vf to_float(const vd& v) {
  return __builtin_convertvector(v, vf);
}

namespace detail {

template <int k, int... L>
inline vd shift_up(const vd& v, std::integer_sequence<int, L...>) {
  const vd zero = vd{};
  return __builtin_shufflevector(v, zero, (L >= k ? L - k : kVW)...);
}

template <int k>
inline vd scan_steps(const vd& v) {
  if constexpr (k >= kVW) {
    return v;
  } else {
    return scan_steps<2 * k>(v + shift_up<k>(v, std::make_integer_sequence<int, kVW>{}));
  }
}

}  // namespace detail

// Inclusive prefix sum across the lanes (log-step shifts).
inline vd prefix_sum(const vd& v) {
  return detail::scan_steps<1>(v);
}

// Lane c of the result = sum of the lanes of v[c], for c < kVW (v is overwritten). A transpose
// and add tree: 2 (kVW - 1) shuffles and kVW - 1 adds for kVW horizontal sums.
inline vf reduce_lanes(vf* v) {
  detail::fold_level<kVW>(v, kVW);
  return v[0];
}

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

inline vf expv(vf x) {
  return exp2v(x * kLog2e);
}

// log(1 + x) for x in [0, 1]: 2 atanh(z) with z = x / (2 + x) in [0, 1/3], by its odd series to
// z^13 (truncation below 1e-8 relative). No 1 + x is formed, so tiny x keep their precision.
inline vf log1p_unitv(vf x) {
  const vf z = x / (splat(2.0f) + x), w = z * z;
  vf p = splat(1.0f / 13.0f);
  p = fmadd(p, w, splat(1.0f / 11.0f));
  p = fmadd(p, w, splat(1.0f / 9.0f));
  p = fmadd(p, w, splat(1.0f / 7.0f));
  p = fmadd(p, w, splat(1.0f / 5.0f));
  p = fmadd(p, w, splat(1.0f / 3.0f));
  p = fmadd(p, w, splat(1.0f));
  return splat(2.0f) * z * p;
}

// tanh(x): odd Taylor polynomial near 0, 1 - 2 / (e^(2|x|) + 1) elsewhere; error ~2e-7.
inline vf tanhv(vf x) {
  vf ax = vmax(x, -x);
  vf x2 = x * x;
  // tanh x = x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - 1382x^11/155925 + 21844x^13/6081075
  vf p = splat(21844.0f / 6081075.0f);
  p = fmadd(p, x2, splat(-1382.0f / 155925.0f));
  p = fmadd(p, x2, splat(62.0f / 2835.0f));
  p = fmadd(p, x2, splat(-17.0f / 315.0f));
  p = fmadd(p, x2, splat(2.0f / 15.0f));
  p = fmadd(p, x2, splat(-1.0f / 3.0f));
  p = fmadd(p, x2, splat(1.0f));
  vf small = p * x;
  vf big = splat(1.0f) - splat(2.0f) / (exp2v(ax * (2.0f * kLog2e)) + 1.0f);
  big = select(x < splat(0.0f), -big, big);
  return select(ax < splat(0.4f), small, big);
}

}  // namespace attn::cpu::ATTN_CPU_NS
