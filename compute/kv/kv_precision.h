// Storage precisions of a KV cache, as round trips: each function returns the value the stored
// code decodes to. They are the definition the cache's storage (compute/kv/kv_rows.h) encodes
// by: a cached element decodes to exactly what these functions return.
#pragma once
#include <cstdint>

namespace attn {

// IEEE binary16 and bfloat16, round to nearest even; binary16 overflows to infinity as a cast
// does, bfloat16 keeps f32's range.
float round_fp16(float x);
float round_bf16(float x);
// OCP FP8: e4m3 (bias 7, no infinities, largest finite 448) and e5m2 (bias 15, largest finite
// 57344), round to nearest even, saturating at the largest finite value (what cache kernels do
// to avoid NaN from an outlier); NaN stays NaN.
float round_fp8(float x, bool e4m3);

// Asymmetric min/max integer quantisation of n values x[0], x[stride], ...: codes
// round((x - min) / scale) in [0, 2^bits - 1] with scale = (max - min) / (2^bits - 1); each value
// is replaced by min + code * scale, rounded once (std::fma). The error is at most scale / 2
// per value (0 when the group is constant). Non-finite values leave the group unquantised.
void quantise_group(float* x, int n, int stride, int bits);

// The codes quantise_group stores: codes[i] in [0, 2^bits - 1], the minimum `lo` and the `scale`
// of the group, such that lo + float(codes[i]) * scale (a product, then a sum: two roundings)
// equals the value quantise_group leaves in x[i * stride]. A constant group gets scale 0 and
// codes 0. Returns false when the group cannot be held as codes (a non-finite value, which
// quantise_group leaves alone, or a range whose scale overflows).
bool quantise_codes(const float* x, int n, int stride, int bits, uint8_t* codes, float& lo,
                    float& scale);

}  // namespace attn
