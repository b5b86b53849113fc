// Masks that depend only on the offset d = qp - kp (window, strided, dilated). A position box
// [q_lo, q_hi] x [k_lo, k_hi] covers every offset in [q_lo - k_hi, q_hi - k_lo], so classifying a
// box is a one-dimensional question answered exactly by jumping between kept and dropped offsets.
#pragma once
#include <cstdint>
#include <limits>

#include "compute/layout.h"
#include "compute/mask.h"

namespace attn {

struct Problem;

class OffsetMask : public Mask {
 public:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

  // Smallest kept offset >= d, or kNone.
  virtual int64_t next_kept(int64_t d) const = 0;
  // Smallest dropped offset >= d, or kNone.
  virtual int64_t next_dropped(int64_t d) const = 0;
  // Number of kept offsets in [lo, hi]. Default: sums the kept runs (O(runs)).
  virtual int64_t count_kept(int64_t lo, int64_t hi) const;

  bool keep(int32_t qp, int32_t kp) const override;
  // By runs of kept and dropped offsets (offsets grow with i), not entry by entry.
  void drop_column(int32_t qp0, int32_t kp, int n, float* s) const override;
  // By runs of kept offsets (offsets fall as the key grows).
  void append_kept(int32_t qp, int32_t kp0, int n, int32_t j0,
                   std::vector<int32_t>& out) const override;
  BlockClass classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const override;
};

// Per-query kept keys for default positions, found by jumping from kept offset to kept offset:
// O(kept entries), never visiting dropped ones.
IndexLayout offset_index_layout(const OffsetMask& m, const Problem& p);

}  // namespace attn
