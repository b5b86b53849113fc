// Strided pattern of the Sparse Transformer: a local window of `stride` keys plus every key whose
// offset is a multiple of `stride` (qp - kp = 0 mod stride). Every block along the diagonal
// direction meets a kept diagonal once stride < 2 x block, so blocks would mostly compute dropped
// entries: select() switches to an index layout when blocks waste more than kIndexWasteRatio.
#include <algorithm>

#include "compute/variants/patterns.h"
#include "compute/variants/patterns/offset_mask.h"
#include "compute/variants/patterns/static_pattern.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

using detail::ceil_div;
using detail::floor_div;
using detail::floor_mod;

// Kept offsets: [-s, s] (the window |d| < s plus its multiples +-s) and every multiple of s.
class StridedMask final : public OffsetMask {
 public:
  explicit StridedMask(int64_t stride) : s_(stride) {}
  bool keep(int32_t qp, int32_t kp) const override {
    int64_t d = int64_t(qp) - kp;
    return (d >= -s_ && d <= s_) || floor_mod(d, s_) == 0;
  }
  int64_t next_kept(int64_t d) const override {
    if (d >= -s_ && d <= s_) return d;
    return ceil_div(d, s_) * s_;
  }
  int64_t next_dropped(int64_t d) const override {
    if (s_ == 1) return kNone;
    if (d >= -s_ && d <= s_) d = s_ + 1;
    return floor_mod(d, s_) == 0 ? d + 1 : d;
  }
  int64_t count_kept(int64_t lo, int64_t hi) const override {
    if (lo > hi) return 0;
    int64_t multiples = floor_div(hi, s_) - ceil_div(lo, s_) + 1;
    int64_t w_lo = std::max(lo, -s_), w_hi = std::min(hi, s_);
    int64_t in_window = detail::span(w_lo, w_hi);
    int64_t window_multiples = w_lo <= w_hi ? floor_div(w_hi, s_) - ceil_div(w_lo, s_) + 1 : 0;
    return in_window + multiples - window_multiples;
  }

 private:
  int64_t s_;
};

class StridedPattern final : public StaticPattern {
 public:
  explicit StridedPattern(int64_t stride)
      : StaticPattern(std::make_shared<StridedMask>(stride), 64, true) {}
  VariantInfo info() const override { return kStridedPattern.info(); }

 protected:
  int64_t row_kept(const Problem& p, const Mask& m, int64_t qp) const override {
    int64_t jmax = detail::last_key(p, qp);
    if (jmax < 0) return 0;
    return static_cast<const StridedMask&>(m).count_kept(qp - jmax, qp);
  }
  bool fast_indices(const Problem& p, IndexLayout* out) const override {
    if (!detail::default_positions(p)) return false;
    *out = offset_index_layout(static_cast<const StridedMask&>(*mask_), p);
    return true;
  }
};

VariantInfo strided_info() {
  return {
      "strided",
      "Strided (Sparse Transformer)",
      "static",
      "Child, Gray, Radford, Sutskever 2019, Generating Long Sequences with Sparse Transformers",
      "A local window of `stride` keys plus every key at an offset that is a multiple of "
      "`stride`.",
      {int_param("stride", 1, 1 << 16, 128,
                 "window length and diagonal spacing (paper: ~sqrt(N))")}};
}

std::shared_ptr<const Pattern> make_strided(const Params& params) {
  return std::make_shared<StridedPattern>(int64_t(params.at("stride")));
}

}  // namespace

const PatternFactory kStridedPattern = {strided_info, make_strided};

}  // namespace attn
