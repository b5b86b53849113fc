// Shared machinery of the static (position-only) patterns: layout choice, closed-form density.
#pragma once
#include <memory>

#include "compute/variant.h"

namespace attn {

// Layout block size for a pattern whose paper has a block length: that length when it makes a
// sensible tile (16..256), else 64.
inline int layout_block(int64_t pattern_block) {
  return pattern_block >= 16 && pattern_block <= 256 ? int(pattern_block) : 64;
}

class StaticPattern : public Pattern {
 public:
  bool dynamic() const final { return false; }
  // Blocks from block_layout_from_mask (analytic classify), or, for patterns allowed to, an
  // index layout when the blocks would compute more than kIndexWasteRatio x the kept entries.
  Layout select(const Problem& p, SelectStats* stats, SequenceState* seq) const override;
  // Closed form for default positions: sum over queries of row_kept (each O(1) or O(log n)),
  // divided by the visible entries. -1 for explicit positions (not known without counting).
  double predicted_density(const Problem& p) const override;
  std::shared_ptr<const Mask> mask() const override { return mask_; }

  // A gathered index entry costs about this many dense block entries in the cpu kernels, so an
  // index layout wins once blocks waste more than that. A measured-order guess, not a constant
  // of nature; the choice only affects speed, never the kept set.
  static constexpr double kIndexWasteRatio = 3.0;

 protected:
  StaticPattern(std::shared_ptr<const Mask> mask, int block, bool allow_indices)
      : mask_(std::move(mask)), block_(block), allow_indices_(allow_indices) {}
  // The mask used for this problem (patterns whose mask depends on the problem override this).
  virtual std::shared_ptr<const Mask> mask_for(const Problem& p) const { return mask_; }
  // Kept keys (causal rule included) of a query at position qp, keys at positions 0..n_k-1;
  // `m` is mask_for(p).
  virtual int64_t row_kept(const Problem& p, const Mask& m, int64_t qp) const = 0;
  // Index layout built faster than from blocks (default positions only); false when none.
  virtual bool fast_indices(const Problem& p, IndexLayout* out) const { return false; }

  std::shared_ptr<const Mask> mask_;
  int block_;
  bool allow_indices_;
};

}  // namespace attn
