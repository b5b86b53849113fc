// Sliding window (Longformer's local attention): keep iff |qp - kp| < size. With the causal rule
// that is the last `size` keys, the query's own included.
#include <algorithm>

#include "compute/variants/patterns.h"
#include "compute/variants/patterns/offset_mask.h"
#include "compute/variants/patterns/static_pattern.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

class WindowMask final : public OffsetMask {
 public:
  explicit WindowMask(int64_t size) : size_(size) {}
  bool keep(int32_t qp, int32_t kp) const override {
    int64_t d = int64_t(qp) - kp;
    return d > -size_ && d < size_;
  }
  int64_t next_kept(int64_t d) const override {
    if (d <= -size_) return -size_ + 1;
    return d < size_ ? d : kNone;
  }
  int64_t next_dropped(int64_t d) const override { return d > -size_ && d < size_ ? size_ : d; }
  int64_t count_kept(int64_t lo, int64_t hi) const override {
    return detail::span(std::max(lo, -size_ + 1), std::min(hi, size_ - 1));
  }

 private:
  int64_t size_;
};

class WindowPattern final : public StaticPattern {
 public:
  explicit WindowPattern(int64_t size)
      : StaticPattern(std::make_shared<WindowMask>(size), 64, false), size_(size) {}
  VariantInfo info() const override { return kWindowPattern.info(); }

 protected:
  int64_t row_kept(const Problem& p, const Mask& m, int64_t qp) const override {
    return detail::span(std::max<int64_t>(0, qp - size_ + 1),
                        std::min(detail::last_key(p, qp), qp + size_ - 1));
  }

 private:
  int64_t size_;
};

VariantInfo window_info() {
  return {"window",
          "Sliding window",
          "static",
          "Beltagy, Peters, Cohan 2020, Longformer: The Long-Document Transformer",
          "Each query keeps the keys within `size` positions (causal: the last `size` keys).",
          {int_param("size", 1, 1000000, 256, "window length in tokens, the query included")}};
}

std::shared_ptr<const Pattern> make_window(const Params& params) {
  return std::make_shared<WindowPattern>(int64_t(params.at("size")));
}

}  // namespace

const PatternFactory kWindowPattern = {window_info, make_window};

}  // namespace attn
