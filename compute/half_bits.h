// Bit patterns of 16-bit floats, both directions exact: bf16 and IEEE binary16 (f16) values to
// and from their 16 stored bits. No rounding happens here (compute/kv/kv_precision.h's
// round_bf16 / round_fp16 do that); a value passed to *_value_to_bits must already be one of the
// format's values. F16C instructions where the build has them, portable bit arithmetic elsewhere
// (no _Float16: clang 14 has none on x86).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace attn {

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// x: a bf16 value (its low 16 bits are zero).
inline uint16_t bf16_value_to_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return uint16_t(u >> 16);
}

inline float f16_bits_to_float(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  float f;
  if (e == 0)
    f = std::ldexp(float(m), -24);  // zero and subnormals
  else if (e == 31)
    f = m ? NAN : INFINITY;
  else
    f = std::ldexp(float(m | 0x400), e - 25);
  return (h & 0x8000) ? -f : f;
#endif
}

// x: an f16 value (round_fp16's result: finite values exactly representable, or +-inf).
inline uint16_t f16_value_to_bits(float x) {
#if defined(__F16C__)
  return uint16_t(_cvtss_sh(x, 0));
#else
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const float a = std::fabs(x);
  if (std::isnan(x)) return uint16_t(sign | 0x7E00);
  if (std::isinf(a)) return uint16_t(sign | 0x7C00);
  if (a < 0x1p-14f) return uint16_t(sign | uint16_t(a * 0x1p24f));  // zero and subnormals
  int e;
  const float fr = std::frexp(a, &e);  // a = fr 2^e, fr in [0.5, 1)
  const uint16_t mant = uint16_t(fr * 2048.0f) & 0x3FF;
  return uint16_t(sign | uint16_t((e + 14) << 10) | mant);
#endif
}

}  // namespace attn
