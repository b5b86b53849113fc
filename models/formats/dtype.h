// Element types found in model files (one table: size, safetensors name, NumPy code), and exact
// conversions to f32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attn::models {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool };

// Bytes per element.
size_t dtype_size(DType dtype);
// Safetensors spelling ("F32", "BF16", ...).
const char* dtype_name(DType dtype);
// Parses a safetensors dtype name; returns false for names this library does not know.
bool dtype_from_name(std::string_view name, DType* out);
// NumPy's type code without the byte order ("f4", "i8", "b1"), or null where NumPy has none
// (BF16).
const char* dtype_numpy_code(DType dtype);
// Parses a NumPy type code; returns false for codes this library does not know.
bool dtype_from_numpy_code(std::string_view code, DType* out);
// True for F32, F16, BF16, F64 (types that convert to f32 as floating point).
bool dtype_is_float(DType dtype);

// IEEE half -> float, exact for every value incl. subnormals, Inf and NaN.
float f16_to_f32(uint16_t bits);
// float -> IEEE half, round to nearest even; overflow gives Inf, NaN stays NaN.
uint16_t f32_to_f16(float value);
// bfloat16 -> float (exact: bf16 is the upper half of an f32).
float bf16_to_f32(uint16_t bits);
// float -> bfloat16, round to nearest even; NaN stays NaN.
uint16_t f32_to_bf16(float value);

// Converts `count` little-endian elements of `dtype` at `src` to f32 into `dst`.
// Integer and bool types convert by value (large i64 lose precision, as in NumPy's astype).
void convert_to_f32(DType dtype, const void* src, size_t count, float* dst);

}  // namespace attn::models
