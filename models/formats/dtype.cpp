#include "models/formats/dtype.h"

#include <cmath>
#include <cstring>

namespace attn::models {

namespace {

// Every dtype once: its size, its safetensors name and NumPy's type code (without the byte
// order; null where NumPy has none).
struct DTypeRow {
  DType dtype;
  size_t size;
  const char* name;
  const char* numpy;
};
constexpr DTypeRow kDTypes[] = {
    {DType::F32, 4, "F32", "f4"},   {DType::F16, 2, "F16", "f2"}, {DType::BF16, 2, "BF16", nullptr},
    {DType::F64, 8, "F64", "f8"},   {DType::I64, 8, "I64", "i8"}, {DType::I32, 4, "I32", "i4"},
    {DType::I16, 2, "I16", "i2"},   {DType::I8, 1, "I8", "i1"},   {DType::U8, 1, "U8", "u1"},
    {DType::Bool, 1, "BOOL", "b1"},
};

const DTypeRow* row_of(DType dtype) {
  for (const DTypeRow& r : kDTypes)
    if (r.dtype == dtype) return &r;
  return nullptr;
}

}  // namespace

size_t dtype_size(DType dtype) {
  const DTypeRow* r = row_of(dtype);
  return r ? r->size : 0;
}

const char* dtype_name(DType dtype) {
  const DTypeRow* r = row_of(dtype);
  return r ? r->name : "?";
}

bool dtype_from_name(std::string_view name, DType* out) {
  for (const DTypeRow& r : kDTypes) {
    if (name == r.name) {
      *out = r.dtype;
      return true;
    }
  }
  return false;
}

const char* dtype_numpy_code(DType dtype) {
  const DTypeRow* r = row_of(dtype);
  return r ? r->numpy : nullptr;
}

bool dtype_from_numpy_code(std::string_view code, DType* out) {
  for (const DTypeRow& r : kDTypes) {
    if (r.numpy && code == r.numpy) {
      *out = r.dtype;
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
