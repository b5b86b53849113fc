// Exponentially dilated offsets in the spirit of PowerAttention: keep offsets 0, 1, base, base^2,
// ... (both directions when bidirectional) plus a dense local window of `local` keys, so the
// receptive field doubles with every layer while each query keeps O(local + log N) keys. The
// kept set is a handful of diagonals, so blocks would mostly compute dropped entries: select()
// switches to an index layout when blocks waste more than kIndexWasteRatio.
#include <cstdlib>

#include "compute/variants/patterns.h"
#include "compute/variants/patterns/offset_mask.h"
#include "compute/variants/patterns/static_pattern.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

class DilatedMask final : public OffsetMask {
 public:
  DilatedMask(int64_t local, int64_t base) : local_(local), base_(base) {}

  bool kept(int64_t d) const {
    int64_t a = d < 0 ? -d : d;
    return a < local_ || is_power(a);
  }
  bool keep(int32_t qp, int32_t kp) const override { return kept(int64_t(qp) - kp); }

  int64_t next_kept(int64_t d) const override {
    if (kept(d)) return d;
    if (d > 0) return next_power(d);
    // d < 0, |d| >= local: the nearest kept offset above is -(largest power <= |d|), or the
    // window's edge when that power lies inside the window.
    int64_t p = prev_power(-d);
    return p >= local_ ? -p : -(local_ - 1);
  }
  int64_t next_dropped(int64_t d) const override {
    // Kept runs are the window (-local, local) and single powers; powers can touch each other
    // (1, 2 for base 2) or the window, so step over them.
    while (kept(d)) {
      int64_t a = d < 0 ? -d : d;
      d = a < local_ ? local_ : d + 1;
    }
    return d;
  }

 private:
  bool is_power(int64_t a) const {  // a = base^k, k >= 0
    if (a < 1) return false;
    while (a % base_ == 0) a /= base_;
    return a == 1;
  }
  int64_t next_power(int64_t a) const {  // smallest power >= a (a >= 1)
    int64_t p = 1;
    while (p < a) p *= base_;
    return p;
  }
  int64_t prev_power(int64_t a) const {  // largest power <= a (a >= 1)
    int64_t p = 1;
    while (p <= a / base_) p *= base_;
    return p;
  }

  int64_t local_, base_;
};

class DilatedPattern final : public StaticPattern {
 public:
  DilatedPattern(int64_t local, int64_t base)
      : StaticPattern(std::make_shared<DilatedMask>(local, base), 64, true) {}
  VariantInfo info() const override { return kDilatedPattern.info(); }

 protected:
  int64_t row_kept(const Problem& p, const Mask& m, int64_t qp) const override {
    int64_t jmax = detail::last_key(p, qp);
    if (jmax < 0) return 0;
    return static_cast<const DilatedMask&>(m).count_kept(qp - jmax, qp);
  }
  bool fast_indices(const Problem& p, IndexLayout* out) const override {
    if (!detail::default_positions(p)) return false;
    *out = offset_index_layout(static_cast<const DilatedMask&>(*mask_), p);
    return true;
  }
};

VariantInfo dilated_info() {
  return {"dilated",
          "Dilated powers (PowerAttention)",
          "static",
          "Chen, Xu, An, Wang, Zhang, Chen, Liang, Wei, Liang, Xiao, Wang 2025, PowerAttention: "
          "Exponentially Scaling of Receptive Fields for Effective Sparse Attention",
          "Keeps offsets 0, 1, base, base^2, ... plus a local window of `local` keys.",
          {int_param("local", 1, 1 << 16, 32, "dense local window in tokens, the query included"),
           int_param("base", 2, 16, 2, "ratio between successive kept offsets")}};
}

std::shared_ptr<const Pattern> make_dilated(const Params& params) {
  return std::make_shared<DilatedPattern>(int64_t(params.at("local")), int64_t(params.at("base")));
}

}  // namespace

const PatternFactory kDilatedPattern = {dilated_info, make_dilated};

}  // namespace attn
