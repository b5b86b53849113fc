// The chunk kernel of kv_attend_rows (compute/kv/kv_attend.h), written once for 16-lane vectors
// (GCC vector extensions) and compiled twice: here for the build's baseline, where a 16-lane
// operation is two AVX2 ones, and by kv_kernels_avx512.cpp inside a target("avx512...") region,
// where it is one. Only exact conversions use intrinsics (f16 -> f32), and ISO C++ mode keeps
// products and sums separately rounded, so both builds compute the same bits.
//
// A row is read 16 elements at a time straight from its codes (bf16: a shift; f16 / fp8: a
// conversion; int-N: unpacked, then min + code * scale) into registers, and each element goes
// to lane (element mod 16) of the accumulators; lanes are summed in one fixed tree.
// Keys of rotary models are rotated as they are read: the row is decoded into a buffer, rotated
// by its target's table row, then dotted.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#include "compute/kv/kv_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "compute/kv/kv_rows.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

// KV_ISA_AVX512 is defined by kv_kernels_avx512.cpp inside its target region.
#if defined(KV_ISA_AVX512) || defined(__AVX512F__)
#define KV_AVX512 1
#define KV_NS isa_avx512
#define KV_ISA_NAME "avx512"
#elif defined(__AVX2__)
#define KV_NS isa_avx2
#define KV_ISA_NAME "avx2"
#else
#define KV_NS isa_generic
#define KV_ISA_NAME "generic"
#endif

// Every helper that takes or returns a vector is inlined: no vector crosses a call, so the
// 16-lane type never meets the baseline's calling convention.
#define KV_INLINE inline __attribute__((always_inline))

namespace attn::kv_detail::KV_NS {
namespace {

typedef float V16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef uint32_t U16 __attribute__((vector_size(64)));
typedef uint16_t H16 __attribute__((vector_size(32)));
typedef uint8_t B16 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));

constexpr int W = 16;

KV_INLINE V16 splat(float x) {
  return V16{} + x;
}

KV_INLINE V16 load(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// n (< 16) floats, zeros after.
KV_INLINE V16 load_part(const float* p, int n) {
  V16 v = {};
  std::memcpy(&v, p, size_t(n) * 4);
  return v;
}

KV_INLINE V16 load_n(const float* p, int n) {
  return n == W ? load(p) : load_part(p, n);
}

KV_INLINE void store(float* p, const V16& v) {
  std::memcpy(p, &v, sizeof v);
}

KV_INLINE void store_n(float* p, const V16& v, int n) {
  std::memcpy(p, &v, size_t(n) * 4);
}

constexpr I16 kLane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// Lanes n .. 15 set to zero.
KV_INLINE V16 keep_first(const V16& v, int n) {
  return kLane < n ? v : V16{};
}

// The 16 lanes summed in a fixed tree: 8 pairs, 4, 2, 1.
KV_INLINE float reduce(const V16& v) {
  float a[W];
  std::memcpy(a, &v, sizeof a);
  for (int w = W / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) a[i] += a[i + w];
  return a[0];
}

KV_INLINE float reduce_max(const V16& v) {
  float a[W];
  std::memcpy(a, &v, sizeof a);
  for (int w = W / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) a[i] = a[i] > a[i + w] ? a[i] : a[i + w];
  return a[0];
}

// 16 f16 values as floats (exact).
KV_INLINE V16 widen_f16(const H16& h) {
#if defined(KV_AVX512)
  __m256i x;
  std::memcpy(&x, &h, 32);
  return V16(_mm512_maskz_cvtph_ps(__mmask16(0xFFFF), x));  // maskz: no undefined source
#elif defined(__F16C__)
  __m128i a, b;
  std::memcpy(&a, &h, 16);
  std::memcpy(&b, reinterpret_cast<const char*>(&h) + 16, 16);
  const V8 lo = V8(_mm256_cvtph_ps(a)), hi = V8(_mm256_cvtph_ps(b));
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  V16 r;
  for (int i = 0; i < W; ++i) {
    _Float16 x;
    std::memcpy(&x, reinterpret_cast<const char*>(&h) + 2 * i, 2);
    r[i] = float(x);
  }
  return r;
#endif
}

// n (<= 16) bytes, zeros after.
KV_INLINE B16 load_bytes(const uint8_t* p, int n) {
  B16 b = {};
  std::memcpy(&b, p, size_t(n));
  return b;
}

// exp(x) for the x <= 0 of a softmax (x = score - max), 0 below -87: 2^n e^r with
// |r| <= ln2 / 2 and a degree-7 Taylor polynomial, about 2 ulp.
KV_INLINE V16 exp_neg(const V16& x0) {
  const I16 dead = x0 < -87.0f;
  const V16 x = dead ? splat(-87.0f) : x0;
  const V16 magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V16 n = (x * 1.44269504f + magic) - magic;
  const V16 r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  V16 e = splat(1.0f / 5040);
  e = e * r + 1.0f / 720;
  e = e * r + 1.0f / 120;
  e = e * r + 1.0f / 24;
  e = e * r + 1.0f / 6;
  e = e * r + 0.5f;
  e = e * r + 1.0f;
  e = e * r + 1.0f;
  const I16 bits = (__builtin_convertvector(n, I16) + 127) << 23;
  const V16 y = e * V16(bits);
  return dead ? V16{} : y;
}

// ---- decoders: a row's elements c0 .. c0 + n - 1 (n <= 16, lanes past n zero) ----

struct F32Rows {
  const uint8_t* codes;
  int stride;
  const uint8_t* row = nullptr;
  void bind(int r) { row = codes + size_t(r) * stride; }
  KV_INLINE V16 at(int c0, int n) const {
    return load_n(reinterpret_cast<const float*>(row) + c0, n);
  }
};

struct Bf16Rows {
  const uint8_t* codes;
  int stride;
  const uint8_t* row = nullptr;
  void bind(int r) { row = codes + size_t(r) * stride; }
  KV_INLINE V16 at(int c0, int n) const {
    H16 h = {};
    std::memcpy(&h, row + 2 * c0, size_t(n) * 2);
    return V16(__builtin_convertvector(h, U16) << 16);
  }
};

struct F16Rows {
  const uint8_t* codes;
  int stride;
  const uint8_t* row = nullptr;
  void bind(int r) { row = codes + size_t(r) * stride; }
  KV_INLINE V16 at(int c0, int n) const {
    H16 h = {};
    std::memcpy(&h, row + 2 * c0, size_t(n) * 2);
    return widen_f16(h);
  }
};

// e5m2 is an f16's top byte; e4m3 an f16 with one exponent bit fewer, scaled by 2^8, whose
// S.1111.111 codes are NaN.
template <bool E4m3>
struct Fp8Rows {
  const uint8_t* codes;
  int stride;
  const uint8_t* row = nullptr;
  void bind(int r) { row = codes + size_t(r) * stride; }
  KV_INLINE V16 at(int c0, int n) const {
    const B16 b = load_bytes(row + c0, n);
    const H16 w = __builtin_convertvector(b, H16);
    if constexpr (!E4m3) {
      return widen_f16(H16(w << 8));
    } else {
      const H16 h = H16(((w & 0x7F) << 7) | ((w & 0x80) << 8));
      const V16 x = widen_f16(h) * 256.0f;
      const I16 nan = I16(__builtin_convertvector(b & 0x7F, U16) == 0x7F);
      return nan ? splat(NAN) : x;
    }
  }
};

// 16 codes of `Bits` bits from p (element 0 at bit 0), n of them, as floats.
template <int Bits>
KV_INLINE V16 unpack(const uint8_t* p, int n) {
  const B16 b = load_bytes(p, n == W ? 2 * Bits : (n * Bits + 7) / 8);
  U16 w;
  if constexpr (Bits == 8) {
    w = __builtin_convertvector(b, U16);
  } else if constexpr (Bits == 4) {
    const B16 s = __builtin_shufflevector(b, b, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    constexpr U16 shift = {0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4};
    w = (__builtin_convertvector(s, U16) >> shift) & 15u;
  } else {
    const B16 s = __builtin_shufflevector(b, b, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    constexpr U16 shift = {0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6};
    w = (__builtin_convertvector(s, U16) >> shift) & 3u;
  }
  return __builtin_convertvector(I16(w), V16);
}

// Per-token int: a row's groups of `group` channels, each its minimum and scale; rows held in f32
// (side >= 0) read from the pool.
template <int Bits>
struct IntTokenRows {
  const uint8_t* codes;
  int stride;
  const float* scales;  // f32 [capacity, groups, 2]
  const int32_t* side;
  const float* pool;
  int d, group, groups;
  const uint8_t* row = nullptr;
  const float* sc = nullptr;
  const float* raw = nullptr;
  void bind(int r) {
    row = codes + size_t(r) * stride;
    sc = scales + size_t(r) * groups * 2;
    raw = side[r] >= 0 ? pool + size_t(side[r]) * d : nullptr;
  }
  KV_INLINE V16 at(int c0, int n) const {
    if (raw) return load_n(raw + c0, n);
    const V16 code = unpack<Bits>(row + c0 * Bits / 8, n);
    V16 lo, scale;
    if (group % W == 0) {
      const int g = c0 / group;
      lo = splat(sc[2 * g]);
      scale = splat(sc[2 * g + 1]);
    } else {
      for (int i = 0; i < W; ++i) {
        const int g = std::min(c0 + i, d - 1) / group;
        lo[i] = sc[2 * g];
        scale[i] = sc[2 * g + 1];
      }
    }
    const V16 x = lo + code * scale;
    return n == W ? x : keep_first(x, n);
  }
};

// Per-channel int: the row's group holds a minimum and scale per channel.
template <int Bits>
struct IntChannelRows {
  const uint8_t* codes;
  int stride;
  const int32_t* group;  // i32 [capacity]
  const float* table;    // f32 [slots, 2, d]
  const int32_t* side;
  const float* pool;
  int d;
  const uint8_t* row = nullptr;
  const float* lo = nullptr;
  const float* raw = nullptr;
  void bind(int r) {
    row = codes + size_t(r) * stride;
    raw = side[r] >= 0 ? pool + size_t(side[r]) * d : nullptr;
    lo = raw ? nullptr : table + size_t(group[r]) * 2 * d;
  }
  KV_INLINE V16 at(int c0, int n) const {
    if (raw) return load_n(raw + c0, n);
    const V16 code = unpack<Bits>(row + c0 * Bits / 8, n);
    return load_n(lo + c0, n) + code * load_n(lo + d + c0, n);
  }
};

// ---- the three passes of a chunk ----

// Row r decoded (and rotated when rope) into buf f32 [dp], zero past d.
template <class D>
KV_INLINE void decode_row(D& dec, const ChunkArgs& a, int r, float* buf, float* tmp) {
  const int d = a.d;
  for (int c0 = 0; c0 < d; c0 += W) store(buf + c0, dec.at(c0, std::min(W, d - c0)));
  if (!a.rope) return;
  const int half = d / 2;
  const float* cs = a.rope + size_t(a.target[r]) * d;
  std::copy_n(buf, d, tmp);
  for (int i = 0; i < half; i += W) {
    const int n = std::min(W, half - i);
    const V16 x = load_n(tmp + i, n), y = load_n(tmp + half + i, n);
    const V16 c = load_n(cs + i, n), s = load_n(cs + half + i, n);
    store_n(buf + i, x * c - y * s, n);
    store_n(buf + half + i, y * c + x * s, n);
  }
}

// s[j][r - r0] = scale * q_j . k_r for the chunk's rows.
template <class D>
void scores(D dec, const ChunkArgs& a, float* buf, float* tmp) {
  const int d = a.d, dp = a.dp, G = a.G;
  for (int r = a.r0; r < a.r1; ++r) {
    dec.bind(r);
    if (G == 1 && !a.rope) {  // straight from the codes
      V16 acc = {};
      for (int c0 = 0; c0 < d; c0 += W) acc += load(a.q + c0) * dec.at(c0, std::min(W, d - c0));
      a.s[r] = reduce(acc) * a.scale;
      continue;
    }
    decode_row(dec, a, r, buf, tmp);
    for (int j = 0; j < G; ++j) {
      const float* q = a.q + size_t(j) * dp;
      V16 acc = {};
      for (int c0 = 0; c0 < d; c0 += W) acc += load(q + c0) * load(buf + c0);
      a.s[size_t(j) * a.s_stride + r] = reduce(acc) * a.scale;
    }
  }
}

// m_j, then s = exp(s - m_j) and l_j = sum of s, over the chunk's rows.
void softmax_part(const ChunkArgs& a) {
  const int n = a.r1 - a.r0;
  for (int j = 0; j < a.G; ++j) {
    float* s = a.s + size_t(j) * a.s_stride + a.r0;
    V16 mx = splat(-INFINITY);
    for (int i = 0; i < n; i += W) {
      const int w = std::min(W, n - i);
      const V16 x = w == W ? load(s + i) : (kLane < w ? load_part(s + i, w) : splat(-INFINITY));
      mx = mx > x ? mx : x;
    }
    const float m = reduce_max(mx);
    V16 sum = {};
    for (int i = 0; i < n; i += W) {
      const int w = std::min(W, n - i);
      const V16 p = exp_neg(load_n(s + i, w) - m);
      const V16 pk = w == W ? p : keep_first(p, w);
      sum += pk;
      store_n(s + i, pk, w);
    }
    a.m[j] = m;
    a.l[j] = reduce(sum);
  }
}

// acc_j = sum over the chunk's rows of s[j][r] * v_r.
template <class D>
void accumulate(D dec, const ChunkArgs& a, float* buf) {
  const int d = a.d, dp = a.dp, G = a.G;
  std::fill_n(a.acc, size_t(G) * dp, 0.0f);
  for (int r = a.r0; r < a.r1; ++r) {
    dec.bind(r);
    if (G == 1) {
      const V16 p = splat(a.s[r]);
      for (int c0 = 0; c0 < d; c0 += W)
        store(a.acc + c0, load(a.acc + c0) + p * dec.at(c0, std::min(W, d - c0)));
      continue;
    }
    for (int c0 = 0; c0 < d; c0 += W) store(buf + c0, dec.at(c0, std::min(W, d - c0)));
    for (int j = 0; j < G; ++j) {
      const V16 p = splat(a.s[size_t(j) * a.s_stride + r]);
      float* acc = a.acc + size_t(j) * dp;
      for (int c0 = 0; c0 < d; c0 += W) store(acc + c0, load(acc + c0) + p * load(buf + c0));
    }
  }
}

// Calls fn with the decoder of head g of `rows`.
template <class Fn>
void with_rows(const KvRows& rows, int g, Fn&& fn) {
  const KvRows::Head& h = rows.head(g);
  const KvFormat& f = rows.format();
  const uint8_t* codes = h.codes.data();
  const int stride = rows.stride(), d = rows.dim();
  switch (f.kind) {
    case KvFormat::Kind::F32:
      return fn(F32Rows{codes, stride});
    case KvFormat::Kind::Bf16:
      return fn(Bf16Rows{codes, stride});
    case KvFormat::Kind::F16:
      return fn(F16Rows{codes, stride});
    case KvFormat::Kind::E4m3:
      return fn(Fp8Rows<true>{codes, stride});
    case KvFormat::Kind::E5m2:
      return fn(Fp8Rows<false>{codes, stride});
    case KvFormat::Kind::Int:
      break;
  }
  const int32_t* side = h.side.data();
  const float* pool = h.pool.data();
  const auto ints = [&]<int Bits>() {
    if (f.per_channel)
      return fn(IntChannelRows<Bits>{codes, stride, h.group.data(), h.table.data(), side, pool, d});
    return fn(
        IntTokenRows<Bits>{codes, stride, h.scales.data(), side, pool, d, f.group, rows.groups()});
  };
  if (f.bits == 2) return ints.template operator()<2>();
  if (f.bits == 4) return ints.template operator()<4>();
  return ints.template operator()<8>();
}

void chunk(const ChunkArgs& a) {
  std::vector<float> buf(size_t(a.dp) + W, 0.0f), tmp(size_t(a.dp) + W, 0.0f);
  with_rows(*a.k, a.g, [&](auto dec) { scores(dec, a, buf.data(), tmp.data()); });
  softmax_part(a);
  with_rows(*a.v, a.g, [&](auto dec) { accumulate(dec, a, buf.data()); });
}

}  // namespace

const Kernels kKernels{KV_ISA_NAME, &chunk};

}  // namespace attn::kv_detail::KV_NS

#if !defined(KV_ISA_AVX512)
namespace attn::kv_detail {
const Kernels& baseline_kernels() {
  return KV_NS::kKernels;
}
}  // namespace attn::kv_detail
#endif
