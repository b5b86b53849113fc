// Host-side expansion of a Layout into the flat arrays the attention and tile kernels read:
// key ranges per row of queries (dense, and block-sparse with partial blocks expanded into kept
// bits, since Mask::keep is a C++ virtual the GPU cannot call), or per-query key lists.
#pragma once
#include <cstdint>
#include <vector>

#include "compute/layout.h"
#include "compute/problem.h"

namespace attn::vk {

struct KernelLayout {
  static constexpr uint32_t kNoMask = 0xffffffffu;  // range word offset of a full range

  bool indices = false;             // per-query key lists (else key ranges)
  bool lines = false;               // key columns and diagonals (else ranges or lists)
  int n_layouts = 1;                // 1 (shared by every head) or one per head
  int bq = 0;                       // ranges: query rows per layout row
  int n_qb = 0;                     // ranges: layout rows, ceil(n_q / bq)
  std::vector<uint32_t> kend;       // u32 [n_q]: query i sees keys [0, kend[i]) (causal rule)
  std::vector<uint32_t> range_ptr;  // u32 [n_layouts, n_qb + 1]: CSR over layout rows
  std::vector<uint32_t> ranges;     // u32 [n_ranges, 4]: j0, j1, mask word offset, words per row
  std::vector<uint32_t> mask_bits;  // u32: partial ranges' kept bits, [bq rows, words per row]
  std::vector<uint32_t> idx_ptr;    // u32 [n_layouts, n_q + 1]: CSR over queries
  std::vector<uint32_t> idx;        // u32 [nnz]: kept keys, ascending per query
  std::vector<uint32_t> line_ptr;   // u32 [n_layouts, 4]: columns [c0, c1), offsets [o0, o1)
  std::vector<int32_t> line_data;   // i32: each layout's columns (ascending), offsets (descending)

  double computed_entries = 0;  // (query, key) pairs the kernel scores, summed over heads
  double kv_rows_read = 0;      // K (and V) rows read from memory, summed over heads
};

// Expands `l` for problem `p`. Dense layouts become one range per `dense_rows` queries.
// `only_head` >= 0 keeps just that head's layout (for the tile query). Line layouts stay lines
// when `keep_lines` is set and the problem has default positions (the lines kernel's rule),
// else they become per-query lists. Throws Error(InvalidArgument) when the layout does not fit
// the problem.
KernelLayout make_kernel_layout(const Problem& p, const Layout& l, int dense_rows,
                                int only_head = -1, bool keep_lines = false);

}  // namespace attn::vk
