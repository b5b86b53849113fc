// kv_quant(bits, group, k_axis, v_axis): KIVI-style asymmetric integer cache. Keys are quantised
// per channel over groups of `group` tokens (the newest incomplete group stays in full precision
// until it fills), values per token over groups of `group` channels; either axis can be switched.
// The cache stores the `bits`-bit codes packed, with an f32 minimum and scale per group
// (compute/kv/kv_rows.h), so an element decodes to exactly what quantise_group leaves.
#include <algorithm>

#include "compute/kv/kv_pieces.h"
#include "compute/kv/kv_precision.h"

namespace attn {

namespace {

class QuantStorage final : public KvStorage {
 public:
  QuantStorage(int bits, int group, bool k_per_channel, bool v_per_channel)
      : bits_(bits), group_(group), k_per_channel_(k_per_channel), v_per_channel_(v_per_channel) {}
  KvFormat format(bool key) const override {
    return {KvFormat::Kind::Int, bits_, group_, channel_group(key) > 0};
  }
  double bytes_per_element(bool, int) const override { return bits_ / 8.0 + 8.0 / group_; }
  void store_rows(float* x, int n, int d, bool key) const override {
    if (channel_group(key) > 0) return;
    for (int r = 0; r < n; ++r)
      for (int c0 = 0; c0 < d; c0 += group_)
        quantise_group(x + size_t(r) * d + c0, std::min(group_, d - c0), 1, bits_);
  }
  int channel_group(bool key) const override {
    return (key ? k_per_channel_ : v_per_channel_) ? group_ : 0;
  }
  void store_channel(float* col, int n) const override { quantise_group(col, n, 1, bits_); }

 private:
  int bits_, group_;
  bool k_per_channel_, v_per_channel_;
};

VariantInfo quant_info() {
  return {"kv_quant",
          "Quantised cache (KIVI-style)",
          kKvPrecisionFamily,
          "Liu et al. 2024, KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache",
          "Asymmetric min/max integer codes per group: K per channel over `group` tokens "
          "(the newest incomplete group kept in full precision), V per token over `group` "
          "channels.",
          {{"bits", ParamSpec::Type::Int, 2, 8, 4, "bits per element: 2, 4 or 8", {}},
           kv_int_param("group", 1, 4096, 32, "elements sharing a scale and minimum"),
           {"k_axis",
            ParamSpec::Type::Enum,
            0,
            1,
            0,
            "K groups run along tokens per channel, or per token",
            {"channel", "token"}},
           {"v_axis",
            ParamSpec::Type::Enum,
            0,
            1,
            0,
            "V groups run along channels per token, or per channel",
            {"token", "channel"}}}};
}

std::shared_ptr<const KvStorage> make_quant(const Params& p) {
  const int bits = int(p.at("bits"));
  kv_check(bits == 2 || bits == 4 || bits == 8, "kv_quant",
           "bits must be 2, 4 or 8, not " + std::to_string(bits));
  return std::make_shared<QuantStorage>(bits, int(p.at("group")), p.at("k_axis") == 0,
                                        p.at("v_axis") == 1);
}

}  // namespace

const KvPieceFactory kKvQuant = {quant_info, nullptr, make_quant};

}  // namespace attn
