#include "compute/variants/patterns/offset_mask.h"

#include <algorithm>
#include <limits>

#include "compute/cpu/huge_pages.h"
#include "compute/error.h"
#include "compute/parallel.h"
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

void OffsetMask::drop_column(int32_t qp0, int32_t kp, int n, float* s) const {
  const int64_t d0 = int64_t(qp0) - kp;
  int64_t i = 0;
  while (i < n) {
    const int64_t kept = next_kept(d0 + i);  // entries [i, kept - d0) are dropped
    const int64_t stop = kept == kNone ? n : std::min<int64_t>(n, kept - d0);
    for (; i < stop; ++i) s[i] = -std::numeric_limits<float>::infinity();
    if (i >= n) break;
    const int64_t dropped = next_dropped(d0 + i);  // entries [i, dropped - d0) are kept
    i = dropped == kNone ? n : std::min<int64_t>(n, dropped - d0);
  }
}

void OffsetMask::append_kept(int32_t qp, int32_t kp0, int n, int32_t j0,
                             std::vector<int32_t>& out) const {
  // Key i has offset d_i = qp - kp0 - i: kept runs of offsets [a, b) from the smallest offset
  // up are runs of keys from the last down, so they are appended in reverse.
  const int64_t dmin = int64_t(qp) - kp0 - (n - 1), dmax = int64_t(qp) - kp0;
  int64_t runs[64][2];
  int nr = 0;
  for (int64_t d = dmin; d <= dmax;) {
    const int64_t a = next_kept(d);
    if (a == kNone || a > dmax) break;
    const int64_t dropped = next_dropped(a);
    const int64_t b = dropped == kNone ? dmax + 1 : std::min<int64_t>(dmax + 1, dropped);
    if (nr == 64) {  // many short runs (a dilated mask): entry by entry
      Mask::append_kept(qp, kp0, n, j0, out);
      return;
    }
    runs[nr][0] = a, runs[nr][1] = b, ++nr;
    d = b;
  }
  for (int r = nr - 1; r >= 0; --r) {
    // Offsets [a, b) are keys i = dmax - (b - 1) .. dmax - a.
    const int64_t i0 = dmax - (runs[r][1] - 1), i1 = dmax - runs[r][0];
    for (int64_t i = i0; i <= i1; ++i) out.push_back(j0 + int32_t(i));
  }
}

BlockClass OffsetMask::classify(int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) const {
  if (q_lo > q_hi || k_lo > k_hi) return BlockClass::Empty;
  int64_t lo = int64_t(q_lo) - k_hi, hi = int64_t(q_hi) - k_lo;
  if (next_kept(lo) > hi) return BlockClass::Empty;  // kNone is larger than any hi
  if (next_dropped(lo) > hi) return BlockClass::Full;
  return BlockClass::Partial;
}

IndexLayout offset_index_layout(const OffsetMask& m, const Problem& p) {
  // Each row's count first (O(1) per row), then rows filled in place in parallel: growing one
  // list entry by entry moved it and faulted fresh pages in again and again.
  IndexLayout x;
  x.row_ptr.assign(size_t(p.n_q) + 1, 0);
  for (int i = 0; i < p.n_q; ++i) {
    const int64_t qp = p.qpos(i), jmax = detail::last_key(p, qp);
    x.row_ptr[size_t(i) + 1] = x.row_ptr[size_t(i)] + (jmax >= 0 ? m.count_kept(qp - jmax, qp) : 0);
  }
  cpu::resize_huge(x.col, size_t(x.row_ptr.back()));
  constexpr int kRows = 256;
  parallel_for((p.n_q + kRows - 1) / kRows, [&](int c) {
    for (int i = c * kRows; i < std::min(p.n_q, (c + 1) * kRows); ++i) {
      const int64_t qp = p.qpos(i), jmax = detail::last_key(p, qp);
      if (jmax < 0) continue;
      // Offsets ascend as keys descend: the row is written from its end.
      int32_t* out = x.col.data() + x.row_ptr[size_t(i) + 1];
      const int32_t* begin = x.col.data() + x.row_ptr[size_t(i)];
      for (int64_t d = m.next_kept(qp - jmax); d != OffsetMask::kNone && d <= qp && out > begin;
           d = m.next_kept(d + 1))
        *--out = int32_t(qp - d);
      require(out == begin, ErrorCode::InvalidArgument, "offset mask: kept count disagrees");
    }
  });
  return x;
}

}  // namespace attn
