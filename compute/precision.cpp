#include "compute/precision.h"

#include "compute/error.h"
#include "compute/kv/kv_precision.h"

namespace attn {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::F32:
      return "f32";
    case Precision::Bf16:
      return "bf16";
    case Precision::F16:
      return "f16";
  }
  return "f32";
}

std::vector<std::string> precision_names() {
  return {"f32", "bf16", "f16"};
}

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::F32, Precision::Bf16, Precision::F16})
    if (name == precision_name(p)) return p;
  throw Error(ErrorCode::InvalidArgument, "precision '" + name + "' is not one of " +
                                              join_names(precision_names()) +
                                              did_you_mean(name, precision_names()));
}

double unit_roundoff(Precision p) {
  switch (p) {
    case Precision::F32:
      return 0x1p-24;
    case Precision::Bf16:
      return 0x1p-8;
    case Precision::F16:
      return 0x1p-11;
  }
  return 0x1p-24;
}

int element_bytes(Precision p) {
  return p == Precision::F32 ? 4 : 2;
}

float round_to(Precision p, float x) {
  switch (p) {
    case Precision::F32:
      return x;
    case Precision::Bf16:
      return round_bf16(x);
    case Precision::F16:
      return round_fp16(x);
  }
  return x;
}

}  // namespace attn
