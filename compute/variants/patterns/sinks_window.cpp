// Attention sinks + sliding window (StreamingLLM): keep the first `sinks` positions and the keys
// within `window` positions.
#include <algorithm>

#include "compute/variants/patterns.h"
#include "compute/variants/patterns/static_pattern.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

class SinksWindowMask final : public Mask {
 public:
  SinksWindowMask(int64_t sinks, int64_t window) : sinks_(sinks), window_(window) {}
  bool keep(int32_t qp, int32_t kp) const override {
    int64_t d = int64_t(qp) - kp;
    return kp < sinks_ || (d > -window_ && d < window_);
  }
  // Exact: keys below `sinks` are all kept; the rest of the box is a pure window question.
  BlockClass classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const override {
    if (q_lo > q_hi || k_lo > k_hi) return BlockClass::Empty;
    bool has_sinks = k_lo < sinks_;
    int64_t rest_lo = std::max<int64_t>(k_lo, sinks_);
    if (rest_lo > k_hi) return BlockClass::Full;                      // all keys are sinks
    int64_t lo = int64_t(q_lo) - k_hi, hi = int64_t(q_hi) - rest_lo;  // offsets of the rest
    bool rest_any = hi > -window_ && lo < window_;
    bool rest_all = lo > -window_ && hi < window_;
    if (rest_all) return BlockClass::Full;
    if (!rest_any && !has_sinks) return BlockClass::Empty;
    return BlockClass::Partial;
  }

 private:
  int64_t sinks_, window_;
};

class SinksWindowPattern final : public StaticPattern {
 public:
  SinksWindowPattern(int64_t sinks, int64_t window)
      : StaticPattern(std::make_shared<SinksWindowMask>(sinks, window), 64, false),
        sinks_(sinks),
        window_(window) {}
  VariantInfo info() const override { return kSinksWindowPattern.info(); }

 protected:
  int64_t row_kept(const Problem& p, const Mask& m, int64_t qp) const override {
    int64_t jmax = detail::last_key(p, qp);
    int64_t w_lo = std::max<int64_t>(0, qp - window_ + 1), w_hi = std::min(jmax, qp + window_ - 1);
    int64_t s_hi = std::min(jmax, sinks_ - 1);
    int64_t overlap = detail::span(w_lo, std::min(w_hi, s_hi));
    return detail::span(w_lo, w_hi) + detail::span(0, s_hi) - overlap;
  }

 private:
  int64_t sinks_, window_;
};

VariantInfo sinks_window_info() {
  return {"sinks_window",
          "Sinks + window (StreamingLLM)",
          "static",
          "Xiao, Tian, Chen, Han, Lewis 2023, Efficient Streaming Language Models with Attention "
          "Sinks",
          "Keeps the first `sinks` tokens (attention sinks) plus a sliding window of `window`.",
          {int_param("sinks", 0, 1 << 16, 4, "initial positions always kept"),
           int_param("window", 1, 1000000, 256, "window length in tokens, the query included")}};
}

std::shared_ptr<const Pattern> make_sinks_window(const Params& params) {
  return std::make_shared<SinksWindowPattern>(int64_t(params.at("sinks")),
                                              int64_t(params.at("window")));
}

}  // namespace

const PatternFactory kSinksWindowPattern = {sinks_window_info, make_sinks_window};

}  // namespace attn
