// BigBird (ITC form): blocks of `block` positions; the first `global` blocks attend to and are
// attended by everything, each query block keeps `window` neighbour blocks on each side, and
// `random` further key blocks drawn deterministically from `seed` and the query block. Causal
// problems draw random blocks from the past only (future blocks would be invisible anyway);
// bidirectional ones from every block outside the global and band blocks, so their mask depends
// on the problem's length: Pattern::mask() is the causal form, Layout::mask the exact one.
#include <algorithm>
#include <span>

#include "compute/variants/patterns.h"
#include "compute/variants/patterns/static_pattern.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

using detail::floor_div;
using detail::span;

struct BigBirdParams {
  int64_t block, global, window, random;
  uint64_t seed;
};

class BigBirdMask final : public Mask {
 public:
  // `n_blocks`: key blocks of a bidirectional problem. Random draws for query blocks in
  // [qb_lo, qb_hi] are computed once here; others on demand.
  BigBirdMask(BigBirdParams bp, bool causal, int64_t n_blocks, int64_t qb_lo, int64_t qb_hi)
      : bp_(bp), causal_(causal), n_blocks_(n_blocks), qb_lo_(qb_lo) {
    for (int64_t qb = qb_lo; qb <= qb_hi; ++qb) cache_.push_back(draw(qb));
  }

  // Random key blocks of query block qb, ascending.
  std::span<const int64_t> randoms(int64_t qb, std::vector<int64_t>& scratch) const {
    if (qb >= qb_lo_ && qb < qb_lo_ + int64_t(cache_.size())) return cache_[size_t(qb - qb_lo_)];
    scratch = draw(qb);
    return scratch;
  }

  bool global_row(int64_t qb) const { return qb >= 0 && qb < bp_.global; }

  // Kept key blocks of query block qb within [kl, kh].
  int64_t kept_blocks(int64_t qb, int64_t kl, int64_t kh, std::vector<int64_t>& scratch) const {
    if (global_row(qb)) return span(kl, kh);
    int64_t g_lo = std::max<int64_t>(kl, 0), g_hi = std::min(kh, bp_.global - 1);
    int64_t b_lo = std::max(kl, qb - bp_.window), b_hi = std::min(kh, qb + bp_.window);
    int64_t n =
        span(g_lo, g_hi) + span(b_lo, b_hi) - span(std::max(g_lo, b_lo), std::min(g_hi, b_hi));
    for (int64_t kb : randoms(qb, scratch))
      if (kb >= kl && kb <= kh && !(kb >= g_lo && kb <= g_hi) && !(kb >= b_lo && kb <= b_hi)) ++n;
    return n;
  }

  bool block_kept(int64_t qb, int64_t kb) const {
    if (global_row(qb) || (kb >= 0 && kb < bp_.global)) return true;
    if (kb >= qb - bp_.window && kb <= qb + bp_.window) return true;
    std::vector<int64_t> scratch;
    auto r = randoms(qb, scratch);
    return std::binary_search(r.begin(), r.end(), kb);
  }

  bool keep(int32_t qp, int32_t kp) const override {
    return block_kept(floor_div(qp, bp_.block), floor_div(kp, bp_.block));
  }

  // Exact: the mask is constant on block pairs, so count kept key blocks row by row.
  BlockClass classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const override {
    if (q_lo > q_hi || k_lo > k_hi) return BlockClass::Empty;
    int64_t kl = floor_div(k_lo, bp_.block), kh = floor_div(k_hi, bp_.block);
    bool any = false, all = true;
    std::vector<int64_t> scratch;
    for (int64_t qb = floor_div(q_lo, bp_.block); qb <= floor_div(q_hi, bp_.block); ++qb) {
      int64_t n = kept_blocks(qb, kl, kh, scratch);
      any = any || n > 0;
      all = all && n == kh - kl + 1;
      if (any && !all) return BlockClass::Partial;
    }
    return any ? BlockClass::Full : BlockClass::Empty;
  }

  const BigBirdParams& params() const { return bp_; }

 private:
  // Floyd's sampling of min(random, candidates) distinct candidates, seeded per query block.
  std::vector<int64_t> draw(int64_t qb) const {
    std::vector<int64_t> out;
    if (qb < 0 || global_row(qb) || bp_.random == 0) return out;
    int64_t g = bp_.global, w = bp_.window;
    int64_t band_lo = 0, band_n = 0, n = 0;
    if (causal_) {
      n = std::max<int64_t>(0, qb - w - g);  // candidates g .. qb - w - 1
    } else {
      band_lo = std::max(g, qb - w);
      band_n = span(band_lo, std::min(n_blocks_ - 1, qb + w));
      n = std::max<int64_t>(0, n_blocks_ - g - band_n);
    }
    int64_t m = std::min(bp_.random, n);
    detail::SplitMix64 rng(detail::mix_seed(bp_.seed, uint64_t(qb)));
    for (int64_t t = n - m; t < n; ++t) {
      int64_t x = int64_t(rng.below(uint64_t(t + 1)));
      out.push_back(std::find(out.begin(), out.end(), x) == out.end() ? x : t);
    }
    for (auto& t : out) t = (g + t < band_lo || band_n == 0) ? g + t : g + t + band_n;
    std::sort(out.begin(), out.end());
    return out;
  }

  BigBirdParams bp_;
  bool causal_;
  int64_t n_blocks_;
  int64_t qb_lo_;
  std::vector<std::vector<int64_t>> cache_;
};

class BigBirdPattern final : public StaticPattern {
 public:
  explicit BigBirdPattern(BigBirdParams bp)
      : StaticPattern(std::make_shared<BigBirdMask>(bp, true, 0, 0, -1), layout_block(bp.block),
                      false),
        bp_(bp) {}
  VariantInfo info() const override { return kBigBirdPattern.info(); }

 protected:
  std::shared_ptr<const Mask> mask_for(const Problem& p) const override {
    int64_t n_blocks = floor_div(p.kpos(p.n_k - 1), bp_.block) + 1;
    return std::make_shared<BigBirdMask>(bp_, p.causal, n_blocks, floor_div(p.qpos(0), bp_.block),
                                         floor_div(p.qpos(p.n_q - 1), bp_.block));
  }

  int64_t row_kept(const Problem& p, const Mask& m, int64_t qp) const override {
    const auto& bm = static_cast<const BigBirdMask&>(m);
    int64_t jmax = detail::last_key(p, qp), b = bp_.block;
    if (jmax < 0) return 0;
    int64_t qb = floor_div(qp, b);
    if (bm.global_row(qb)) return jmax + 1;
    // Keys of key blocks [a, c] that exist and are visible.
    auto keys = [&](int64_t a, int64_t c) {
      return a > c ? 0 : span(std::max<int64_t>(0, a * b), std::min(jmax, c * b + b - 1));
    };
    int64_t g_hi = bp_.global - 1, b_lo = qb - bp_.window, b_hi = qb + bp_.window;
    int64_t n =
        keys(0, g_hi) + keys(b_lo, b_hi) - keys(std::max<int64_t>(0, b_lo), std::min(g_hi, b_hi));
    std::vector<int64_t> scratch;
    for (int64_t kb : bm.randoms(qb, scratch))
      if (kb > g_hi && (kb < b_lo || kb > b_hi)) n += keys(kb, kb);
    return n;
  }

 private:
  BigBirdParams bp_;
};

VariantInfo bigbird_info() {
  return {"bigbird",
          "BigBird: global + window + random",
          "static",
          "Zaheer, Guruganesh, Dubey, Ainslie, Alberti, Ontanon, Pham, Ravula, Wang, Yang, Ahmed "
          "2020, Big Bird: Transformers for Longer Sequences",
          "Block pattern: global blocks (rows and columns), a band of neighbour blocks, and seeded "
          "random blocks.",
          {int_param("block", 1, 4096, 64, "block length in tokens"),
           int_param("global", 0, 1024, 1, "leading blocks that attend to and are attended by all"),
           int_param("window", 0, 1024, 1, "neighbour blocks kept on each side (1: 3-block band)"),
           int_param("random", 0, 1024, 3, "random key blocks per query block"),
           int_param("seed", 0, 1e9, 0, "seed of the random blocks")}};
}

std::shared_ptr<const Pattern> make_bigbird(const Params& params) {
  return std::make_shared<BigBirdPattern>(BigBirdParams{
      int64_t(params.at("block")), int64_t(params.at("global")), int64_t(params.at("window")),
      int64_t(params.at("random")), uint64_t(params.at("seed"))});
}

}  // namespace

const PatternFactory kBigBirdPattern = {bigbird_info, make_bigbird};

}  // namespace attn
