#include "compute/mask.h"

#include <limits>

namespace attn {

void Mask::drop_column(int32_t qp0, int32_t kp, int n, float* s) const {
  for (int i = 0; i < n; ++i)
    if (!keep(qp0 + i, kp)) s[i] = -std::numeric_limits<float>::infinity();
}

void Mask::append_kept(int32_t qp, int32_t kp0, int n, int32_t j0,
                       std::vector<int32_t>& out) const {
  for (int i = 0; i < n; ++i)
    if (keep(qp, kp0 + i)) out.push_back(j0 + i);
}

// Exact by brute force: stops as soon as the box is known to be mixed.
BlockClass Mask::classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const {
  if (q_lo > q_hi || k_lo > k_hi) return BlockClass::Empty;
  bool any = false, all = true;
  for (int64_t qp = q_lo; qp <= q_hi; ++qp)
    for (int64_t kp = k_lo; kp <= k_hi; ++kp) {
      if (keep(int32_t(qp), int32_t(kp)))
        any = true;
      else
        all = false;
      if (any && !all) return BlockClass::Partial;
    }
  return any ? BlockClass::Full : BlockClass::Empty;
}

}  // namespace attn
