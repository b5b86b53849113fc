#include "compute/kv/kv_precision.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace attn {

namespace {

// Rounds x to a float with `mant` explicit mantissa bits and exponents down to `min_exp` (the
// smallest normal exponent; below it the spacing stays 2^(min_exp - mant), i.e. subnormals),
// nearest even. Range is the caller's business.
float round_to(float x, int mant, int min_exp) {
  if (!std::isfinite(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1: the leading bit has weight 2^(e-1)
  const int lead = std::max(e - 1, min_exp);
  const double quantum = std::ldexp(1.0, lead - mant);
  return float(std::nearbyint(double(x) / quantum) * quantum);  // ties to even (default mode)
}

}  // namespace

float round_fp16(float x) {
  const float r = round_to(x, 10, -14);
  if (std::fabs(r) > 65504.0f) return std::copysign(INFINITY, x);
  return r;
}

float round_bf16(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t u = std::bit_cast<uint32_t>(x);
  u += 0x7FFFu + ((u >> 16) & 1u);  // nearest even on the 16 dropped bits
  return std::bit_cast<float>(u & 0xFFFF0000u);
}

float round_fp8(float x, bool e4m3) {
  if (std::isnan(x)) return x;
  const float max = e4m3 ? 448.0f : 57344.0f;
  const float r = std::isinf(x) ? x : round_to(x, e4m3 ? 3 : 2, e4m3 ? -6 : -14);
  return std::clamp(r, -max, max);
}

void quantise_group(float* x, int n, int stride, int bits) {
  if (n <= 0) return;
  float lo = x[0], hi = x[0];
  for (int i = 0; i < n; ++i) {
    const float v = x[size_t(i) * stride];
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const float levels = float((1 << bits) - 1);
  const float scale = (hi - lo) / levels;
  if (!(scale > 0)) return;
  for (int i = 0; i < n; ++i) {
    float& v = x[size_t(i) * stride];
    const float code = std::clamp(std::nearbyint((v - lo) / scale), 0.0f, levels);
    v = std::fma(code, scale, lo);  // one rounding, on every build (the cache decodes so)
  }
}

bool quantise_codes(const float* x, int n, int stride, int bits, uint8_t* codes, float& lo,
                    float& scale) {
  lo = scale = 0;
  if (n <= 0) return true;
  float hi = x[0];
  lo = x[0];
  for (int i = 0; i < n; ++i) {
    const float v = x[size_t(i) * stride];
    if (!std::isfinite(v)) return false;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const float levels = float((1 << bits) - 1);
  scale = (hi - lo) / levels;
  if (!(scale > 0)) {  // every value is lo
    scale = 0;
    std::fill_n(codes, n, uint8_t(0));
    return true;
  }
  if (!std::isfinite(scale)) return false;
  for (int i = 0; i < n; ++i) {
    const float v = x[size_t(i) * stride];
    codes[i] = uint8_t(std::clamp(std::nearbyint((v - lo) / scale), 0.0f, levels));
  }
  return true;
}

}  // namespace attn
