#include "models/formats/dtype.h"

#include <cmath>
#include <cstring>

namespace attn::models {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::F64:
      return "F64";
    case DType::I64:
      return "I64";
    case DType::I32:
      return "I32";
    case DType::I16:
      return "I16";
    case DType::I8:
      return "I8";
    case DType::U8:
      return "U8";
    case DType::Bool:
      return "BOOL";
  }
  return "?";
}

bool dtype_from_name(std::string_view name, DType* out) {
  static constexpr DType kAll[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64,
                                   DType::I32, DType::I16, DType::I8,   DType::U8,  DType::Bool};
  for (DType d : kAll) {
    if (name == dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool dtype_is_float(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F64;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(float(mant), -24);  // zero or subnormal: mant * 2^-24
  } else if (exp == 31) {
    uint32_t bits = 0x7f800000u | (mant << 13);  // Inf, or NaN keeping its payload
    std::memcpy(&magnitude, &bits, 4);
  } else {
    uint32_t bits = ((exp + 112u) << 23) | (mant << 13);  // rebias 15 -> 127
    std::memcpy(&magnitude, &bits, 4);
  }
  uint32_t out;
  std::memcpy(&out, &magnitude, 4);
  out |= sign;
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

uint16_t f32_to_f16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24 rounded to nearest even.
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = std::nearbyint(std::ldexp(a, 24));  // default mode: ties to even
    return uint16_t(sign | uint16_t(scaled));
  }
  // Normal: drop 13 mantissa bits with round to nearest even; carries roll into the exponent.
  uint32_t rebased = abs - (112u << 23);
  const uint32_t lsb = (rebased >> 13) & 1u;
  rebased += 0xfffu + lsb;
  return uint16_t(sign | uint16_t(rebased >> 13));
}

float bf16_to_f32(uint16_t bits) {
  const uint32_t x = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t f32_to_bf16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return uint16_t(x >> 16);
}

namespace {
template <typename T>
void convert_plain(const void* src, size_t count, float* dst) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));  // source may be unaligned
    dst[i] = static_cast<float>(v);
  }
}
template <float (*F)(uint16_t)>
void convert_half(const void* src, size_t count, float* dst) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count; ++i) {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    dst[i] = F(v);
  }
}
}  // namespace

void convert_to_f32(DType dtype, const void* src, size_t count, float* dst) {
  if (count == 0) return;  // src and dst may be null for empty tensors
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, src, count * 4);
      return;
    case DType::F16:
      convert_half<f16_to_f32>(src, count, dst);
      return;
    case DType::BF16:
      convert_half<bf16_to_f32>(src, count, dst);
      return;
    case DType::F64:
      convert_plain<double>(src, count, dst);
      return;
    case DType::I64:
      convert_plain<int64_t>(src, count, dst);
      return;
    case DType::I32:
      convert_plain<int32_t>(src, count, dst);
      return;
    case DType::I16:
      convert_plain<int16_t>(src, count, dst);
      return;
    case DType::I8:
      convert_plain<int8_t>(src, count, dst);
      return;
    case DType::U8:
      convert_plain<uint8_t>(src, count, dst);
      return;
    case DType::Bool: {
      const auto* p = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = p[i] ? 1.0f : 0.0f;
      return;
    }
  }
}

}  // namespace attn::models
