// kv_fp8(format), kv_fp16, kv_bf16: K and V stored element by element in a narrower float
// (compute/kv/kv_precision.h has the roundings, compute/kv/kv_rows.h the bytes).
#include "compute/kv/kv_pieces.h"
#include "compute/kv/kv_precision.h"

namespace attn {

namespace {

// Stores every element in `kind`, which rounds it with `round`.
template <typename Round>
class FloatStorage final : public KvStorage {
 public:
  FloatStorage(Round round, KvFormat::Kind kind, int bits)
      : round_(round), format_{kind, bits, 0, false} {}
  KvFormat format(bool) const override { return format_; }
  double bytes_per_element(bool, int) const override { return format_.bits / 8.0; }
  void store_rows(float* x, int n, int d, bool) const override {
    const size_t m = size_t(n) * d;
    for (size_t i = 0; i < m; ++i) x[i] = round_(x[i]);
  }

 private:
  Round round_;
  KvFormat format_;
};

template <typename Round>
std::shared_ptr<const KvStorage> float_storage(Round round, KvFormat::Kind kind, int bits) {
  return std::make_shared<FloatStorage<Round>>(round, kind, bits);
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
  return float_storage([e4m3](float x) { return round_fp8(x, e4m3); },
                       e4m3 ? KvFormat::Kind::E4m3 : KvFormat::Kind::E5m2, 8);
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
  return float_storage([](float x) { return round_fp16(x); }, KvFormat::Kind::F16, 16);
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
  return float_storage([](float x) { return round_bf16(x); }, KvFormat::Kind::Bf16, 16);
}

}  // namespace

const KvPieceFactory kKvFp8 = {fp8_info, nullptr, make_fp8};
const KvPieceFactory kKvFp16 = {fp16_info, nullptr, make_fp16};
const KvPieceFactory kKvBf16 = {bf16_info, nullptr, make_bf16};

}  // namespace attn
