// Storage precisions of a KV cache, as round trips: each function returns the value the stored
// code decodes to, so attention reads exactly what a cache of that precision would hold (the
// bytes are counted by KvPolicy::key_bytes_per_element).
#pragma once

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
// is replaced by min + code * scale. The error is at most scale / 2 per value (0 when the group
// is constant). Non-finite values leave the group unquantised.
void quantise_group(float* x, int n, int stride, int bits);

}  // namespace attn
