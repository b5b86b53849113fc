// Storage precision of Q, K and V inside a backend's attention kernels (RunOptions::precision):
// f32 as given, or converted once per execute to 16-bit storage (round to nearest even) that the
// kernels really read. Scores, softmax and the output accumulate in f32 whatever the storage
// (as FlashAttention does); Result::stats.precision names what ran.
#pragma once
#include <string>
#include <vector>

namespace attn {

enum class Precision {
  F32,   // IEEE binary32, as the problem holds it
  Bf16,  // bfloat16: f32's range, 8 significand bits
  F16,   // IEEE binary16: 11 significand bits, largest finite 65504
};

// "f32", "bf16", "f16".
const char* precision_name(Precision p);
// Every precision name, in enum order.
std::vector<std::string> precision_names();
// The precision named `name`; throws Error(InvalidArgument) listing the names otherwise.
Precision parse_precision(const std::string& name);
// Unit roundoff of the storage format under round to nearest: 2^-24, 2^-8, 2^-11 (the largest
// relative error of one stored value, away from f16's subnormals and overflow).
double unit_roundoff(Precision p);
// Bytes of one stored element: 4 or 2.
int element_bytes(Precision p);
// `x` stored in `p` and read back (round to nearest even; f32 unchanged): the value the
// kernels see.
float round_to(Precision p, float x);

}  // namespace attn
