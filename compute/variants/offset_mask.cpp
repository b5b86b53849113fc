#include "compute/variants/offset_mask.h"

#include <algorithm>

#include "compute/problem.h"
#include "compute/variants/util.h"

namespace attn {

int64_t OffsetMask::count_kept(int64_t lo, int64_t hi) const {
  int64_t total = 0;
  for (int64_t x = next_kept(lo); x != kNone && x <= hi;) {
    int64_t y = next_dropped(x);  // the run [x, y) is kept
    if (y == kNone || y > hi) return total + (hi - x + 1);
    total += y - x;
    x = next_kept(y);
  }
  return total;
}

bool OffsetMask::keep(int32_t qp, int32_t kp) const {
  int64_t d = int64_t(qp) - kp;
  return next_kept(d) == d;
}

BlockClass OffsetMask::classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const {
  if (q_lo > q_hi || k_lo > k_hi) return BlockClass::Empty;
  int64_t lo = int64_t(q_lo) - k_hi, hi = int64_t(q_hi) - k_lo;
  if (next_kept(lo) > hi) return BlockClass::Empty;  // kNone is larger than any hi
  if (next_dropped(lo) > hi) return BlockClass::Full;
  return BlockClass::Partial;
}

IndexLayout offset_index_layout(const OffsetMask& m, const Problem& p) {
  IndexLayout x;
  x.row_ptr.assign(size_t(p.n_q) + 1, 0);
  for (int i = 0; i < p.n_q; ++i) {
    int64_t qp = p.qpos(i), jmax = detail::last_key(p, qp);
    if (jmax >= 0) {
      // Offsets ascend as keys descend: collect, then reverse the row into ascending keys.
      size_t start = x.col.size();
      int64_t dhi = qp;  // key 0
      for (int64_t d = m.next_kept(qp - jmax); d != OffsetMask::kNone && d <= dhi;
           d = m.next_kept(d + 1))
        x.col.push_back(int32_t(qp - d));
      std::reverse(x.col.begin() + start, x.col.end());
    }
    x.row_ptr[i + 1] = int64_t(x.col.size());
  }
  return x;
}

}  // namespace attn
