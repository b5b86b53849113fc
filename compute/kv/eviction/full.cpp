// kv_full: keeps every key and value; the baseline the other policies are measured against.
#include "compute/kv/kv_pieces.h"

namespace attn {

namespace {

class FullEviction final : public KvEviction {
 public:
  bool evicts() const override { return false; }
};

VariantInfo full_info() {
  return {"kv_full",
          "Full cache",
          kKvEvictionFamily,
          "Vaswani et al. 2017, Attention Is All You Need",
          "Keeps every key and value (stops at the context of a learned-position model).",
          {kv_reposition_param()}};
}

std::shared_ptr<const KvEviction> make_full(const Params&) {
  return std::make_shared<FullEviction>();
}

}  // namespace

const KvPieceFactory kKvFull = {full_info, make_full, nullptr};

}  // namespace attn
