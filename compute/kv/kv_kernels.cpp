// The chunk kernel of kv_attend_rows (compute/kv/kv_attend.h), written once against a 16-lane
// vector (compute/kv/kv_simd.h) and compiled twice: here for the build's baseline, where the
// vector is two AVX2 registers, and by kv_kernels_avx512.cpp inside a target("avx512...")
// region, where it is one. Both builds compute the same bits: this file is compiled with
// -ffp-contract=off (compute/CMakeLists.txt), every fused multiply-add is written out, and
// intrinsics appear only for exact operations (widening conversions, unpacking codes).
//
// Pass 1 (scores) reads each key row straight from its codes, 16 elements at a time, into
// registers: bf16 a shift, f16 / fp8 a conversion, int-N one 16-byte block per 16 * (8 / N)
// elements, shifted and masked, then fma(code, scale, min) as quantise_group defines it.
// Each element goes to lane (element mod 16) of the accumulator; lanes are summed in one fixed
// tree. Keys of rotary models are rotated as they are read (fma(x, cos, -(y * sin)) and
// fma(y, cos, x * sin), as models/arch/kv_cache.cpp rotates a gathered key). Per-channel int
// keys without rotation use q . (min + code * scale) = q . min + (q * scale) . code, with
// q . min and q * scale once per group. Pass 2 is the chunk's softmax (its own maximum), pass 3
// adds p * v row by row; per-token int values add fma(code, p * scale, acc) and collect p * min
// per group. Which arithmetic runs depends on the format and shape only, never on the ISA.
// The vector helpers are always inlined, so no vector crosses a call; the ABI note is noise.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#include "compute/kv/kv_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "compute/half_bits.h"
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

namespace attn::kv_detail::KV_NS {
namespace {

#include "compute/kv/kv_simd.h"

// ---- decoders ----
// Each binds to a row (bind) and hands its 16-element chunks, in order, to a function:
// for_chunks(f) calls f(c0, n, values) with the dequantised values of elements c0 .. c0 + n - 1
// (n <= 16, lanes past n zero). Int decoders also give the raw codes (for_codes) and the row's
// f32 copy when it has one (raw).

// Float formats: one chunk at a time from `Bytes`-byte elements.
template <class Self, int Bytes>
struct FloatRows {
  static constexpr int kBytes = Bytes;
  const uint8_t* codes;
  int stride, d;
  const uint8_t* row = nullptr;
  static constexpr const float* raw = nullptr;
  void bind(int r) { row = codes + size_t(r) * stride; }
  template <class F>
  KV_INLINE void for_chunks(F&& f) const {
    for (int c0 = 0; c0 < d; c0 += W) {
      const int n = std::min(W, d - c0);
      f(c0, n, static_cast<const Self*>(this)->chunk(row + size_t(c0) * Bytes, n));
    }
  }
};

struct F32Rows : FloatRows<F32Rows, 4> {
  KV_INLINE V16 chunk(const uint8_t* p, int n) const {
    return load_n(reinterpret_cast<const float*>(p), n);
  }
};
struct Bf16Rows : FloatRows<Bf16Rows, 2> {
  KV_INLINE V16 chunk(const uint8_t* p, int n) const { return halves_bf16(load_halves(p, n)); }
};
struct F16Rows : FloatRows<F16Rows, 2> {
  KV_INLINE V16 chunk(const uint8_t* p, int n) const { return halves_f16(load_halves(p, n)); }
};
// e5m2 is an f16's top byte; e4m3 an f16 with one exponent bit fewer, scaled by 2^8, whose
// S.1111.111 codes are NaN (read that way they give +-480, which no finite e4m3 value is).
template <bool E4m3>
struct Fp8Rows : FloatRows<Fp8Rows<E4m3>, 1> {
  KV_INLINE V16 chunk(const uint8_t* p, int n) const {
    const B16 b = n == W ? load_bytes<W>(p) : load_bytes_part(p, n);
    const H16 w = bytes_to_halves(b);
    if constexpr (!E4m3) {
      return halves_f16(H16(w << 8));
    } else {
      const H16 h = H16(((w & 0x7F) << 7) | ((w & 0x80) << 8));
      const V16 x = halves_f16(h) * splat(256.0f);
      return select(either(equal(x, splat(480.0f)), equal(x, splat(-480.0f))), splat(NAN), x);
    }
  }
};

// Int codes sit in blocks of 16 bytes: byte j of block b holds elements b * E + j + 16 * s at bits
// s * Bits (E = 128 / Bits; kv_rows.h). Calls f(c0, n, codes) for every chunk, in order, one
// load per block and constant shifts.
template <int S, int Bits>
KV_INLINE B16 sub_codes(const B16& b) {
  if constexpr (Bits == 8) {
    return b;
  } else {
#if defined(__SSE2__)
    return B16(_mm_and_si128(_mm_srli_epi16(__m128i(b), S * Bits), _mm_set1_epi8((1 << Bits) - 1)));
#else
    return B16((b >> (S * Bits)) & uint8_t((1 << Bits) - 1));
#endif
  }
}
template <int Bits, class F>
KV_INLINE void for_codes_of(const uint8_t* row, int stride, int d, F&& f) {
  constexpr int E = 128 / Bits;
  for (int c0 = 0, off = 0; c0 < d; c0 += E, off += 16) {
    const B16 b =
        stride - off >= 16 ? load_bytes<16>(row + off) : load_bytes_part(row + off, stride - off);
    [&]<int... S>(std::integer_sequence<int, S...>) {
      ((c0 + 16 * S < d
            ? f(c0 + 16 * S, std::min(W, d - c0 - 16 * S), bytes_to_float(sub_codes<S, Bits>(b)))
            : void()),
       ...);
    }
    (std::make_integer_sequence<int, 8 / Bits>{});
  }
}

// The same for two rows at once: f(c0, codes of row 0, codes of row 1).
template <int Bits, class F>
KV_INLINE void for_codes_of2(const uint8_t* row0, const uint8_t* row1, int stride, int d, F&& f) {
  constexpr int E = 128 / Bits;
  for (int c0 = 0, off = 0; c0 < d; c0 += E, off += 16) {
    const bool full = stride - off >= 16;
    const B16 b0 = full ? load_bytes<16>(row0 + off) : load_bytes_part(row0 + off, stride - off);
    const B16 b1 = full ? load_bytes<16>(row1 + off) : load_bytes_part(row1 + off, stride - off);
    [&]<int... S>(std::integer_sequence<int, S...>) {
      ((c0 + 16 * S < d ? f(c0 + 16 * S, bytes_to_float(sub_codes<S, Bits>(b0)),
                            bytes_to_float(sub_codes<S, Bits>(b1)))
                        : void()),
       ...);
    }
    (std::make_integer_sequence<int, 8 / Bits>{});
  }
}

// Per-token int: a row's groups of `group` channels, each its minimum and scale; rows held in f32
// (side >= 0) read from the pool.
template <int Bits>
struct IntTokenRows {
  static constexpr int kBits = Bits;
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
  template <class F>
  KV_INLINE void for_codes(F&& f) const {
    for_codes_of<Bits>(row, stride, d, f);
  }
  // The values of chunk c0 (n elements) from its codes.
  KV_INLINE V16 dequant(int c0, int n, const V16& code) const {
    V16 lo, scale;
    if (group % W == 0) {
      const int g = c0 / group;
      lo = splat(sc[2 * g]);
      scale = splat(sc[2 * g + 1]);
    } else {
      float l[W], s[W];
      for (int i = 0; i < W; ++i) {
        const int g = std::min(c0 + i, d - 1) / group;
        l[i] = sc[2 * g];
        s[i] = sc[2 * g + 1];
      }
      lo = load(l);
      scale = load(s);
    }
    const V16 x = fmadd(code, scale, lo);
    return n == W ? x : keep_first(x, n);
  }
  template <class F>
  KV_INLINE void for_chunks(F&& f) const {
    if (raw) {
      for (int c0 = 0; c0 < d; c0 += W)
        f(c0, std::min(W, d - c0), load_n(raw + c0, std::min(W, d - c0)));
      return;
    }
    for_codes([&](int c0, int n, const V16& code) { f(c0, n, dequant(c0, n, code)); });
  }
};

// Per-channel int: the row's group holds a minimum and scale per channel.
template <int Bits>
struct IntChannelRows {
  static constexpr int kBits = Bits;
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
  int slot = -1;
  void bind(int r) {
    row = codes + size_t(r) * stride;
    raw = side[r] >= 0 ? pool + size_t(side[r]) * d : nullptr;
    slot = raw ? -1 : group[r];
    lo = raw ? nullptr : table + size_t(slot) * 2 * d;
  }
  template <class F>
  KV_INLINE void for_codes(F&& f) const {
    for_codes_of<Bits>(row, stride, d, f);
  }
  KV_INLINE V16 dequant(int c0, int n, const V16& code) const {
    return fmadd(code, load_n(lo + d + c0, n), load_n(lo + c0, n));
  }
  template <class F>
  KV_INLINE void for_chunks(F&& f) const {
    if (raw) {
      for (int c0 = 0; c0 < d; c0 += W)
        f(c0, std::min(W, d - c0), load_n(raw + c0, std::min(W, d - c0)));
      return;
    }
    for_codes([&](int c0, int n, const V16& code) { f(c0, n, dequant(c0, n, code)); });
  }
};

template <class D>
inline constexpr bool kIntChannel = false;
template <int Bits>
inline constexpr bool kIntChannel<IntChannelRows<Bits>> = true;
template <class D>
inline constexpr bool kIntToken = false;
template <int Bits>
inline constexpr bool kIntToken<IntTokenRows<Bits>> = true;

// ---- pass 1: scores ----

// Calls f(i, x, y) for each chunk i of the first half of the row with the dequantised chunks
// i and i + d/2 (d/2 a multiple of 16): floats read both directly, int codes load the two blocks
// they sit in when d/2 is a whole number of blocks, else the row goes through buf.
template <class D, class F>
KV_INLINE void for_pairs(const D& dec, int d, float* buf, F&& f) {
  const int half = d / 2;
  if constexpr (requires { dec.chunk(nullptr, 0); }) {
    constexpr int bytes = D::kBytes;
    for (int i = 0; i < half; i += W)
      f(i, dec.chunk(dec.row + size_t(i) * bytes, W),
        dec.chunk(dec.row + size_t(half + i) * bytes, W));
  } else {
    constexpr int bits = D::kBits, E = 128 / bits;
    if (!dec.raw && half % E == 0) {  // blocks b and b + half / E hold chunks i and i + half
      const int apart = half / E * 16;
      for (int i0 = 0, off = 0; i0 < half; i0 += E, off += 16) {
        const B16 bx = load_bytes<16>(dec.row + off), by = load_bytes<16>(dec.row + off + apart);
        [&]<int... S>(std::integer_sequence<int, S...>) {
          (f(i0 + 16 * S, dec.dequant(i0 + 16 * S, W, bytes_to_float(sub_codes<S, bits>(bx))),
             dec.dequant(half + i0 + 16 * S, W, bytes_to_float(sub_codes<S, bits>(by)))),
           ...);
        }
        (std::make_integer_sequence<int, 8 / bits>{});
      }
      return;
    }
    dec.for_chunks([&](int c0, int, const V16& x) { store(buf + c0, x); });
    for (int i = 0; i < half; i += W) f(i, load(buf + i), load(buf + half + i));
  }
}

// Row r's keys into buf f32 [dp] (zero past d), rotated when the chunk has a rotary table (pairs
// (i, i + d/2) by the row's target).
template <class D>
KV_INLINE void key_row(const D& dec, const ChunkArgs& a, int r, float* buf, float* tmp) {
  dec.for_chunks([&](int c0, int, const V16& x) { store(buf + c0, x); });
  if (!a.rope) return;
  const int d = a.d, half = d / 2;
  const float* cs = a.rope + size_t(a.target[r]) * d;
  std::copy_n(buf, d, tmp);
  for (int i = 0; i < half; i += W) {
    const int n = std::min(W, half - i);
    const V16 x = load_n(tmp + i, n), y = load_n(tmp + half + i, n);
    const V16 c = load_n(cs + i, n), s = load_n(cs + half + i, n);
    store_n(buf + i, fmadd(x, c, -(y * s)), n);
    store_n(buf + half + i, fmadd(y, c, x * s), n);
  }
}

// s[j][r] = scale * q_j . k_r: with one query and no rotation straight from the codes; with
// rotation and d/2 a multiple of 16, each pair of chunks rotated in registers (accumulated
// chunk i, then chunk i + d/2); otherwise each row decoded (and rotated) once into buf, then
// dotted with the G queries in element order.
template <class D>
void scores_plain(D dec, const ChunkArgs& a, float* buf, float* tmp) {
  const int d = a.d, dp = a.dp, G = a.G, half = d / 2;
  const bool pairs = a.rope && half % W == 0;
  for (int r = a.r0; r < a.r1; ++r) {
    dec.bind(r);
    if (G == 1 && !a.rope) {
      if constexpr (requires { dec.chunk(nullptr, 0); }) {
        if (r + 1 < a.r1) {  // two rows at a time, each its own accumulator
          D next = dec;
          next.bind(r + 1);
          V16 acc0 = splat(0), acc1 = splat(0);
          for (int c0 = 0; c0 < d; c0 += W) {
            const int n = std::min(W, d - c0);
            const size_t at = size_t(c0) * D::kBytes;
            const V16 q = load(a.q + c0);
            acc0 = fmadd(q, dec.chunk(dec.row + at, n), acc0);
            acc1 = fmadd(q, next.chunk(next.row + at, n), acc1);
          }
          a.s[r] = reduce(acc0) * a.scale;
          a.s[r + 1] = reduce(acc1) * a.scale;
          ++r;
          continue;
        }
      }
      V16 acc = splat(0);
      dec.for_chunks([&](int c0, int, const V16& k) { acc = fmadd(load(a.q + c0), k, acc); });
      a.s[r] = reduce(acc) * a.scale;
      continue;
    }
    if (pairs) {
      const float* cs = a.rope + size_t(a.target[r]) * d;
      const auto rotate = [&](int i, const V16& x, const V16& y, V16& xr, V16& yr) {
        const V16 c = load(cs + i), s = load(cs + half + i);
        xr = fmadd(x, c, -(y * s));
        yr = fmadd(y, c, x * s);
      };
      if (G == 1) {
        V16 acc = splat(0);
        for_pairs(dec, d, buf, [&](int i, const V16& x, const V16& y) {
          V16 xr, yr;
          rotate(i, x, y, xr, yr);
          acc = fmadd(load(a.q + i), xr, acc);
          acc = fmadd(load(a.q + half + i), yr, acc);
        });
        a.s[r] = reduce(acc) * a.scale;
        continue;
      }
      for_pairs(dec, d, tmp, [&](int i, const V16& x, const V16& y) {
        V16 xr, yr;
        rotate(i, x, y, xr, yr);
        store(buf + i, xr);
        store(buf + half + i, yr);
      });
      for (int j = 0; j < G; ++j) {
        const float* q = a.q + size_t(j) * dp;
        V16 acc = splat(0);
        for (int i = 0; i < half; i += W) {
          acc = fmadd(load(q + i), load(buf + i), acc);
          acc = fmadd(load(q + half + i), load(buf + half + i), acc);
        }
        a.s[size_t(j) * a.s_stride + r] = reduce(acc) * a.scale;
      }
      continue;
    }
    key_row(dec, a, r, buf, tmp);
    for (int j = 0; j < G; ++j) {
      const float* q = a.q + size_t(j) * dp;
      V16 acc = splat(0);
      for (int c0 = 0; c0 < d; c0 += W) acc = fmadd(load(q + c0), load(buf + c0), acc);
      a.s[size_t(j) * a.s_stride + r] = reduce(acc) * a.scale;
    }
  }
}

// Per-channel int keys without rotation: q . (lo + code * scale) = q . lo + (q * scale) . code,
// with q . lo and q * scale computed once per group (rows of one group are mostly adjacent), so
// a row costs its codes only. Rows held in f32 are dotted as they are.
template <int Bits>
void scores_channel(IntChannelRows<Bits> dec, const ChunkArgs& a, float* qs, float* codes) {
  const int d = a.d, dp = a.dp, G = a.G;
  float qlo[64];
  int cached = -1;
  for (int r = a.r0; r < a.r1; ++r) {
    dec.bind(r);
    if (dec.raw) {
      for (int j = 0; j < G; ++j) {
        const float* q = a.q + size_t(j) * dp;
        V16 acc = splat(0);
        for (int c0 = 0; c0 < d; c0 += W)
          acc = fmadd(load(q + c0), load_n(dec.raw + c0, std::min(W, d - c0)), acc);
        a.s[size_t(j) * a.s_stride + r] = reduce(acc) * a.scale;
      }
      continue;
    }
    if (dec.slot != cached) {  // qs f32 [G, dp] = q * scale, qlo[j] = q . lo
      cached = dec.slot;
      for (int j = 0; j < G; ++j) {
        const float* q = a.q + size_t(j) * dp;
        V16 acc = splat(0);
        for (int c0 = 0; c0 < d; c0 += W) {
          const int n = std::min(W, d - c0);
          store(qs + size_t(j) * dp + c0, load(q + c0) * load_n(dec.lo + d + c0, n));
          acc = fmadd(load(q + c0), load_n(dec.lo + c0, n), acc);
        }
        qlo[j] = reduce(acc);
      }
    }
    if (G == 1) {
      V16 acc = splat(0);
      dec.for_codes([&](int c0, int, const V16& code) { acc = fmadd(load(qs + c0), code, acc); });
      a.s[r] = (qlo[0] + reduce(acc)) * a.scale;
      continue;
    }
    dec.for_codes([&](int c0, int, const V16& code) { store(codes + c0, code); });
    for (int j = 0; j < G; ++j) {
      const float* q = qs + size_t(j) * dp;
      V16 acc = splat(0);
      for (int c0 = 0; c0 < d; c0 += W) acc = fmadd(load(q + c0), load(codes + c0), acc);
      a.s[size_t(j) * a.s_stride + r] = (qlo[j] + reduce(acc)) * a.scale;
    }
  }
}

template <class D>
void scores(D dec, const ChunkArgs& a, float* buf, float* tmp) {
  if constexpr (kIntChannel<D>) {
    if (!a.rope && a.G <= 64) return scores_channel(dec, a, buf, tmp);
  }
  scores_plain(dec, a, buf, tmp);
}

// m_j, then s = exp(s - m_j) and l_j = sum of s, over the chunk's rows.
void softmax_part(const ChunkArgs& a) {
  const int n = a.r1 - a.r0;
  for (int j = 0; j < a.G; ++j) {
    float* s = a.s + size_t(j) * a.s_stride + a.r0;
    V16 mx = splat(-INFINITY);
    for (int i = 0; i < n; i += W) {
      const int w = std::min(W, n - i);
      const V16 x =
          w == W ? load(s + i) : select(lanes_below(w), load_part(s + i, w), splat(-INFINITY));
      mx = vmax(mx, x);
    }
    const float m = reduce_max(mx);
    V16 sum = splat(0);
    for (int i = 0; i < n; i += W) {
      const int w = std::min(W, n - i);
      const V16 p = exp_neg(load_n(s + i, w) - splat(m));
      const V16 pk = w == W ? p : keep_first(p, w);
      sum += pk;
      store_n(s + i, pk, w);
    }
    a.m[j] = m;
    a.l[j] = reduce(sum);
  }
}

// ---- pass 3: acc_j = sum over rows of p_j(r) * v_r, rows in order ----

// Per-token int values whose groups align with chunks: a row adds fma(code, p * scale, acc) per
// chunk, and p * lo to its group's lo_sum, added to the group's channels once at the end. Rows
// held in f32 add p * v.
template <int Bits>
void accumulate_token(IntTokenRows<Bits> dec, const ChunkArgs& a) {
  const int d = a.d, dp = a.dp, G = a.G, groups = dec.groups;
  std::vector<float> lo_sum(size_t(G) * groups, 0.0f), ps(size_t(std::max(G, 2)) * groups);
  IntTokenRows<Bits> next = dec;
  for (int r = a.r0; r < a.r1; ++r) {
    dec.bind(r);
    if (dec.raw) {
      for (int j = 0; j < G; ++j) {
        const V16 p = splat(a.s[size_t(j) * a.s_stride + r]);
        float* acc = a.acc + size_t(j) * dp;
        for (int c0 = 0; c0 < d; c0 += W)
          store(acc + c0, fmadd(p, load_n(dec.raw + c0, std::min(W, d - c0)), load(acc + c0)));
      }
      continue;
    }
    if (G == 1 && r + 1 < a.r1) {  // two coded rows per pass (the same sums, in the same order)
      next.bind(r + 1);
      if (!next.raw) {
        const float p0 = a.s[r], p1 = a.s[r + 1];
        for (int g = 0; g < groups; ++g) {
          ps[size_t(2 * g)] = p0 * dec.sc[2 * g + 1];
          ps[size_t(2 * g + 1)] = p1 * next.sc[2 * g + 1];
          lo_sum[size_t(g)] += p0 * dec.sc[2 * g];
          lo_sum[size_t(g)] += p1 * next.sc[2 * g];
        }
        for_codes_of2<Bits>(
            dec.row, next.row, dec.stride, d, [&](int c0, const V16& code0, const V16& code1) {
              const int g = c0 / dec.group;
              const V16 x = fmadd(code0, splat(ps[size_t(2 * g)]), load(a.acc + c0));
              store(a.acc + c0, fmadd(code1, splat(ps[size_t(2 * g + 1)]), x));
            });
        ++r;
        continue;
      }
    }
    for (int j = 0; j < G; ++j) {
      const float p = a.s[size_t(j) * a.s_stride + r];
      for (int g = 0; g < groups; ++g) {
        ps[size_t(j) * groups + g] = p * dec.sc[2 * g + 1];
        lo_sum[size_t(j) * groups + g] += p * dec.sc[2 * g];
      }
    }
    dec.for_codes([&](int c0, int, const V16& code) {
      const int g = c0 / dec.group;
      for (int j = 0; j < G; ++j) {
        float* acc = a.acc + size_t(j) * dp + c0;
        store(acc, fmadd(code, splat(ps[size_t(j) * groups + g]), load(acc)));
      }
    });
  }
  for (int j = 0; j < G; ++j)
    for (int c0 = 0; c0 < d; c0 += W) {
      const int n = std::min(W, d - c0);
      const V16 lo = splat(lo_sum[size_t(j) * groups + c0 / dec.group]);
      float* acc = a.acc + size_t(j) * dp + c0;
      store(acc, load(acc) + (n == W ? lo : keep_first(lo, n)));
    }
}

template <class D>
void accumulate(D dec, const ChunkArgs& a) {
  const int dp = a.dp, G = a.G;
  std::fill_n(a.acc, size_t(G) * dp, 0.0f);
  if constexpr (kIntToken<D>) {
    if (dec.group % W == 0) return accumulate_token(dec, a);
  }
  int r = a.r0;
  if constexpr (requires { dec.chunk(nullptr, 0); }) {
    if (G == 1) {  // two rows per pass over the accumulators (the same sums, in the same order)
      const int d = a.d;
      D next = dec;
      for (; r + 1 < a.r1; r += 2) {
        dec.bind(r);
        next.bind(r + 1);
        const V16 p0 = splat(a.s[r]), p1 = splat(a.s[r + 1]);
        for (int c0 = 0; c0 < d; c0 += W) {
          const int n = std::min(W, d - c0);
          const size_t at = size_t(c0) * D::kBytes;
          const V16 x = fmadd(p0, dec.chunk(dec.row + at, n), load(a.acc + c0));
          store(a.acc + c0, fmadd(p1, next.chunk(next.row + at, n), x));
        }
      }
    }
  }
  for (; r < a.r1; ++r) {
    dec.bind(r);
    dec.for_chunks([&](int c0, int, const V16& v) {
      for (int j = 0; j < G; ++j) {
        float* acc = a.acc + size_t(j) * dp + c0;
        store(acc, fmadd(splat(a.s[size_t(j) * a.s_stride + r]), v, load(acc)));
      }
    });
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
      return fn(F32Rows{{codes, stride, d}});
    case KvFormat::Kind::Bf16:
      return fn(Bf16Rows{{codes, stride, d}});
    case KvFormat::Kind::F16:
      return fn(F16Rows{{codes, stride, d}});
    case KvFormat::Kind::E4m3:
      return fn(Fp8Rows<true>{{codes, stride, d}});
    case KvFormat::Kind::E5m2:
      return fn(Fp8Rows<false>{{codes, stride, d}});
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
  // buf: a decoded row, or the per-channel keys' q * scale f32 [G, dp]; tmp: a rotated row.
  std::vector<float> buf(size_t(a.dp) * std::max(a.G, 1) + W, 0.0f), tmp(size_t(a.dp) + W, 0.0f);
  with_rows(*a.k, a.g, [&](auto dec) { scores(dec, a, buf.data(), tmp.data()); });
  softmax_part(a);
  with_rows(*a.v, a.g, [&](auto dec) { accumulate(dec, a); });
}

void decode(const KvRows& rows, int h, const int32_t* idx, int n, float* out) {
  const int d = rows.dim();
  with_rows(rows, h, [&](auto dec) {
    for (int i = 0; i < n; ++i) {
      dec.bind(idx[i]);
      float* o = out + size_t(i) * d;
      dec.for_chunks([&](int c0, int m, const V16& x) { store_n(o + c0, x, m); });
    }
  });
}

}  // namespace

const Kernels kKernels{KV_ISA_NAME, &chunk, &decode};

}  // namespace attn::kv_detail::KV_NS

#if !defined(KV_ISA_AVX512)
namespace attn::kv_detail {
const Kernels& baseline_kernels() {
  return KV_NS::kKernels;
}
}  // namespace attn::kv_detail
#endif
