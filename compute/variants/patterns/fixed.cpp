// Fixed pattern of the Sparse Transformer: keep keys in the query's own block of `block`
// positions, plus the last `summary` positions of every block (the "summary" columns every later
// query reads). The summary columns run through every key block, so blocks would be partial
// nearly everywhere: select() switches to an index layout when blocks waste more than
// kIndexWasteRatio.
#include <algorithm>

#include "compute/cpu/huge_pages.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/patterns/static_pattern.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

using detail::floor_div;
using detail::floor_mod;

class FixedMask final : public Mask {
 public:
  FixedMask(int64_t block, int64_t summary) : b_(block), c_(summary) {}
  int64_t summary() const { return c_; }
  bool is_summary(int64_t kp) const { return floor_mod(kp, b_) >= b_ - c_; }
  bool keep(int32_t qp, int32_t kp) const override {
    return floor_div(qp, b_) == floor_div(kp, b_) || is_summary(kp);
  }
  // Summary positions in [lo, hi].
  int64_t summaries(int64_t lo, int64_t hi) const {
    return lo > hi ? 0 : below(hi + 1) - below(lo);
  }
  // Exact: summary columns are kept for every query; the others only in the query's block.
  BlockClass classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const override {
    if (q_lo > q_hi || k_lo > k_hi) return BlockClass::Empty;
    int64_t qb_lo = floor_div(q_lo, b_), qb_hi = floor_div(q_hi, b_);
    int64_t kb_lo = floor_div(k_lo, b_), kb_hi = floor_div(k_hi, b_);
    int64_t n_keys = int64_t(k_hi) - k_lo + 1, n_summary = summaries(k_lo, k_hi);
    if (n_summary == n_keys) return BlockClass::Full;
    // Some non-summary key exists; all of them must share the single query block.
    if (qb_lo == qb_hi && first_plain(k_lo) >= qb_lo * b_ && last_plain(k_hi) < (qb_lo + 1) * b_)
      return BlockClass::Full;
    if (n_summary > 0 || std::max(qb_lo, kb_lo) <= std::min(qb_hi, kb_hi))
      return BlockClass::Partial;
    return BlockClass::Empty;
  }

 private:
  // Summary positions in [0, x) extended to all integers as a function with below(0) = 0.
  int64_t below(int64_t x) const {
    return floor_div(x, b_) * c_ + std::max<int64_t>(0, floor_mod(x, b_) - (b_ - c_));
  }
  // First / last non-summary position >= x / <= x (callers know one exists in their range).
  int64_t first_plain(int64_t x) const {
    return floor_mod(x, b_) < b_ - c_ ? x : (floor_div(x, b_) + 1) * b_;
  }
  int64_t last_plain(int64_t x) const {
    return floor_mod(x, b_) < b_ - c_ ? x : floor_div(x, b_) * b_ + (b_ - c_ - 1);
  }

  int64_t b_, c_;
};

class FixedPattern final : public StaticPattern {
 public:
  FixedPattern(int64_t block, int64_t summary)
      : StaticPattern(std::make_shared<FixedMask>(block, summary), layout_block(block), true),
        b_(block) {}
  VariantInfo info() const override { return kFixedPattern.info(); }

 protected:
  // Per query: summary columns of earlier blocks, the own block, summary columns after it.
  bool fast_indices(const Problem& p, IndexLayout* out) const override {
    if (!detail::default_positions(p)) return false;
    const int64_t first_summary = b_ - static_cast<const FixedMask&>(*mask_).summary();
    // Row sizes first, then rows filled in place in parallel (a list grown entry by entry moves
    // and faults fresh pages in again and again).
    out->row_ptr.assign(size_t(p.n_q) + 1, 0);
    for (int i = 0; i < p.n_q; ++i)
      out->row_ptr[size_t(i) + 1] = out->row_ptr[size_t(i)] + row_kept(p, *mask_, p.qpos(i));
    cpu::resize_huge(out->col, size_t(out->row_ptr.back()));
    constexpr int kRows = 256;
    parallel_for((p.n_q + kRows - 1) / kRows, [&](int c) {
      for (int i = c * kRows; i < std::min(p.n_q, (c + 1) * kRows); ++i) {
        const int64_t qp = p.qpos(i), jmax = detail::last_key(p, qp);
        const int64_t own = floor_div(qp, b_) * b_;
        int32_t* w = out->col.data() + out->row_ptr[size_t(i)];
        int32_t* const end = out->col.data() + out->row_ptr[size_t(i) + 1];
        for (int64_t s = 0; s <= jmax; s += b_) {
          const int64_t lo = s == own ? s : s + first_summary, hi = std::min(jmax, s + b_ - 1);
          for (int64_t j = lo; j <= hi && w < end; ++j) *w++ = int32_t(j);
        }
        require(w == end, ErrorCode::InvalidArgument, "fixed: kept count disagrees");
      }
    });
    return true;
  }

  int64_t row_kept(const Problem& p, const Mask& m, int64_t qp) const override {
    const auto& fm = static_cast<const FixedMask&>(m);
    int64_t jmax = detail::last_key(p, qp);
    if (jmax < 0) return 0;
    int64_t own_lo = std::max<int64_t>(0, floor_div(qp, b_) * b_);
    int64_t own_hi = std::min(jmax, floor_div(qp, b_) * b_ + b_ - 1);
    return detail::span(own_lo, own_hi) + fm.summaries(0, jmax) - fm.summaries(own_lo, own_hi);
  }

 private:
  int64_t b_;
};

VariantInfo fixed_info() {
  return {
      "fixed",
      "Fixed (Sparse Transformer)",
      "static",
      "Child, Gray, Radford, Sutskever 2019, Generating Long Sequences with Sparse Transformers",
      "Keys in the query's own block of `block` positions plus the last `summary` positions of "
      "every block.",
      {int_param("block", 1, 4096, 128, "block length in tokens (paper: 128)"),
       int_param("summary", 0, 4096, 8, "summary positions at the end of each block (<= block)")}};
}

std::shared_ptr<const Pattern> make_fixed(const Params& params) {
  int64_t block = int64_t(params.at("block")), summary = int64_t(params.at("summary"));
  require(summary <= block, ErrorCode::BadParameter,
          "fixed(summary=" + std::to_string(summary) + "): must not exceed block (" +
              std::to_string(block) + ")");
  return std::make_shared<FixedPattern>(block, summary);
}

}  // namespace

const PatternFactory kFixedPattern = {fixed_info, make_fixed};

}  // namespace attn
