// The kept set of a variant: which (query, key) entries are computed. Kernels execute it
// sparsely; the reference backend masks with it. Always intersected with the causal rule.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "compute/mask.h"

namespace attn {

// Block-sparse kept set over index space: query block r covers queries [r*bq, min((r+1)*bq, n_q)),
// key block c covers keys [c*bk, min((c+1)*bk, n_k)).
struct BlockLayout {
  int bq = 64, bk = 64;          // block sizes (queries, keys)
  int n_qb = 0, n_kb = 0;        // number of query / key blocks
  std::vector<int32_t> row_ptr;  // i32 [n_qb + 1]: CSR row pointers over query blocks
  std::vector<int32_t> col;      // i32 [nnz]: kept key blocks, ascending within a row
  std::vector<uint8_t> full;     // u8 [nnz]: 1 = every entry kept (causal rule only);
                                 //           0 = partial: entry kept iff Layout::mask keeps it

  int64_t nnz() const { return int64_t(col.size()); }
};

// Index-sparse kept set: per query, the kept keys (ascending, each visible under the causal rule).
struct IndexLayout {
  std::vector<int64_t> row_ptr;  // i64 [n_q + 1]
  std::vector<int32_t> col;      // i32 [nnz]

  int64_t nnz() const { return int64_t(col.size()); }
};

// Kept set made of lines, the shape of MInference's vertical-slash pattern: every query keeps
// its visible keys among `columns` and, for each offset o in `offsets`, the visible key at
// position qpos - o (one per diagonal). O(columns + offsets) memory however many queries run,
// where per-query lists would repeat every column in every row.
struct LineLayout {
  std::vector<int32_t> columns;  // i32 [vertical]: key indices, strictly ascending
  std::vector<int64_t> offsets;  // i64 [slash]: qpos - kpos, strictly descending (so a row's
                                 //              keys on them ascend), |o| < 2^32
};

struct Layout {
  enum class Kind { Dense, Blocks, Indices, Lines };
  Kind kind = Kind::Dense;  // Dense: every visible key is kept
  // One entry per query head, or exactly one entry shared by every head (static patterns).
  std::vector<BlockLayout> blocks;   // Kind::Blocks
  std::vector<IndexLayout> indices;  // Kind::Indices
  std::vector<LineLayout> lines;     // Kind::Lines
  // Element mask consulted in partial blocks (Kind::Blocks only); null = causal rule only.
  std::shared_ptr<const Mask> mask;

  const BlockLayout& block(int head) const { return blocks.size() == 1 ? blocks[0] : blocks[head]; }
  const IndexLayout& index(int head) const {
    return indices.size() == 1 ? indices[0] : indices[head];
  }
  const LineLayout& line(int head) const { return lines.size() == 1 ? lines[0] : lines[head]; }
};

// Layout l restricted to head h: a one-head layout of the same kind.
Layout head_layout(const Layout& l, int h);

struct Problem;

// True when entry (i, j) of head h is in the kept set (causal rule included).
// O(log nnz_row): for tests, metrics and the tile query, never for kernels' inner loops.
bool layout_keeps(const Layout& l, const Problem& p, int h, int i, int j);

// Number of kept entries (causal rule included) of head h, counted exactly.
int64_t layout_kept_entries(const Layout& l, const Problem& p, int h);

// Number of entries visible under the causal rule for one head (n_q * n_k when bidirectional).
int64_t visible_entries(const Problem& p);

// Kept keys of query i of head h, ascending (causal rule and partial masks applied).
void layout_row_keys(const Layout& l, const Problem& p, int h, int i, std::vector<int32_t>& out);

// Converts any layout to per-query key lists (exact kept set), e.g. for backends that only run
// index-sparse kernels.
IndexLayout to_index_layout(const Layout& l, const Problem& p, int h);

// `l` with every head's lines as per-query key lists (kind Indices); other kinds unchanged.
Layout lines_to_indices(const Layout& l, const Problem& p);

// Builds a block layout for a static mask analytically from Mask::classify over position ranges.
BlockLayout block_layout_from_mask(const Mask& m, const Problem& p, int bq, int bk);

}  // namespace attn
