// kv_fp8(format), kv_fp16, kv_bf16: K and V rounded element by element to a narrower float
// (compute/kv/kv_precision.h has the roundings).
#include "compute/kv/kv_pieces.h"
#include "compute/kv/kv_precision.h"

namespace attn {

namespace {

// Rounds every element with `round` and counts `bytes` per element.
template <typename Round>
class FloatStorage final : public KvStorage {
 public:
  FloatStorage(Round round, double bytes) : round_(round), bytes_(bytes) {}
  double bytes_per_element(bool, int) const override { return bytes_; }
  void store_rows(float* x, int n, int d, bool) const override {
    const size_t m = size_t(n) * d;
    for (size_t i = 0; i < m; ++i) x[i] = round_(x[i]);
  }

 private:
  Round round_;
  double bytes_;
};

template <typename Round>
std::shared_ptr<const KvStorage> float_storage(Round round, double bytes) {
  return std::make_shared<FloatStorage<Round>>(round, bytes);
}

VariantInfo fp8_info() {
  return {"kv_fp8",
          "FP8 cache",
          kKvPrecisionFamily,
          "Micikevicius et al. 2022, FP8 Formats for Deep Learning",
          "K and V rounded to 8-bit floats (nearest even, saturating at the largest finite).",
          {{"format",
            ParamSpec::Type::Enum,
            0,
            1,
            0,
            "e4m3 (max 448) or e5m2 (max 57344)",
            {"e4m3", "e5m2"}}}};
}
std::shared_ptr<const KvStorage> make_fp8(const Params& p) {
  const bool e4m3 = p.at("format") == 0;
  return float_storage([e4m3](float x) { return round_fp8(x, e4m3); }, 1);
}

VariantInfo fp16_info() {
  return {"kv_fp16",
          "FP16 cache",
          kKvPrecisionFamily,
          "IEEE 754-2008 binary16",
          "K and V rounded to half precision (nearest even).",
          {}};
}
std::shared_ptr<const KvStorage> make_fp16(const Params&) {
  return float_storage([](float x) { return round_fp16(x); }, 2);
}

VariantInfo bf16_info() {
  return {"kv_bf16",
          "BF16 cache",
          kKvPrecisionFamily,
          "Kalamkar et al. 2019, A Study of BFLOAT16 for Deep Learning Training",
          "K and V rounded to bfloat16 (nearest even).",
          {}};
}
std::shared_ptr<const KvStorage> make_bf16(const Params&) {
  return float_storage([](float x) { return round_bf16(x); }, 2);
}

}  // namespace

const KvPieceFactory kKvFp8 = {fp8_info, nullptr, make_fp8};
const KvPieceFactory kKvFp16 = {fp16_info, nullptr, make_fp16};
const KvPieceFactory kKvBf16 = {bf16_info, nullptr, make_bf16};

}  // namespace attn
