#include "compute/vulkan/kernel_layout.h"

#include <algorithm>
#include <limits>

#include "compute/error.h"

namespace attn::vk {

namespace {

std::vector<uint32_t> visible_prefix(const Problem& p) {
  std::vector<uint32_t> kend(size_t(p.n_q), uint32_t(p.n_k));
  if (!p.causal) return kend;
  // Positions increase, so the visible keys of successive queries grow: one merge-like sweep.
  int j = 0;
  for (int i = 0; i < p.n_q; ++i) {
    while (j < p.n_k && p.kpos(j) <= p.qpos(i)) ++j;
    kend[size_t(i)] = uint32_t(j);
  }
  return kend;
}

void check(bool ok, const std::string& what) {
  if (!ok)
    throw Error(ErrorCode::InvalidArgument, "vulkan: layout does not fit the problem: " + what);
}

void add_dense(const Problem& p, KernelLayout& k, int rows, int heads) {
  k.bq = rows;
  k.n_qb = (p.n_q + rows - 1) / rows;
  k.range_ptr.push_back(0);
  for (int r = 0; r < k.n_qb; ++r) {
    int i0 = r * rows, i1 = std::min(i0 + rows, p.n_q);
    uint32_t j1 = *std::max_element(k.kend.begin() + i0, k.kend.begin() + i1);
    if (j1 > 0) {
      k.ranges.insert(k.ranges.end(), {0u, j1, KernelLayout::kNoMask, 0u});
      k.computed_entries += double(i1 - i0) * j1 * heads;
      k.kv_rows_read += double(j1) * ((i1 - i0 + rows - 1) / rows) * heads;
    }
    k.range_ptr.push_back(uint32_t(k.ranges.size() / 4));
  }
}

void add_blocks(const Problem& p, const Layout& l, const BlockLayout& b, KernelLayout& k, int heads,
                int rows) {
  check(b.bq > 0 && b.bk > 0, "block sizes must be positive");
  check(b.n_qb == (p.n_q + b.bq - 1) / b.bq, "block layout has " + std::to_string(b.n_qb) +
                                                 " query blocks of " + std::to_string(b.bq) +
                                                 " for " + std::to_string(p.n_q) + " queries");
  check(int(b.row_ptr.size()) == b.n_qb + 1 && b.col.size() == b.full.size() &&
            b.row_ptr.back() == int32_t(b.col.size()),
        "block layout CSR arrays are inconsistent");
  if (k.bq == 0) {
    k.bq = b.bq;
    k.n_qb = b.n_qb;
  }
  check(k.bq == b.bq, "per-head block layouts must share one query block size");
  k.range_ptr.push_back(uint32_t(k.ranges.size() / 4));
  for (int r = 0; r < b.n_qb; ++r) {
    int i0 = r * b.bq, i1 = std::min(i0 + b.bq, p.n_q);
    const int chunks = (i1 - i0 + rows - 1) / rows;  // workgroups with live rows
    uint32_t row_kend = *std::max_element(k.kend.begin() + i0, k.kend.begin() + i1);
    check(b.row_ptr[r] <= b.row_ptr[r + 1], "block layout row pointers decrease");
    for (int32_t e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e) {
      check(b.col[e] >= 0 && int64_t(b.col[e]) * b.bk < p.n_k,
            "key block " + std::to_string(b.col[e]) + " is out of range");
      uint32_t j0 = uint32_t(b.col[e]) * uint32_t(b.bk);
      uint32_t j1 = std::min<uint32_t>(std::min<uint32_t>(j0 + b.bk, p.n_k), row_kend);
      if (j1 <= j0) continue;  // wholly in the future of every query of the row
      uint32_t offset = KernelLayout::kNoMask, words = 0;
      if (!b.full[e] && l.mask) {
        words = (j1 - j0 + 31) / 32;
        offset = uint32_t(k.mask_bits.size());
        check(k.mask_bits.size() + size_t(b.bq) * words < std::numeric_limits<uint32_t>::max(),
              "too many partial blocks");
        k.mask_bits.resize(k.mask_bits.size() + size_t(b.bq) * words, 0u);
        for (int i = i0; i < i1; ++i) {
          uint32_t* row = k.mask_bits.data() + offset + size_t(i - i0) * words;
          const int32_t qp = p.qpos(i);
          const uint32_t jv = std::min(j1, k.kend[size_t(i)]);
          for (uint32_t j = j0; j < jv; ++j)
            if (l.mask->keep(qp, p.kpos(int(j)))) row[(j - j0) / 32] |= 1u << ((j - j0) % 32);
        }
      }
      k.ranges.insert(k.ranges.end(), {j0, j1, offset, words});
      k.computed_entries += double(i1 - i0) * (j1 - j0) * heads;
      k.kv_rows_read += double(j1 - j0) * chunks * heads;
    }
    k.range_ptr.push_back(uint32_t(k.ranges.size() / 4));
  }
}

void add_indices(const Problem& p, const IndexLayout& x, KernelLayout& k, int heads) {
  check(int64_t(x.row_ptr.size()) == int64_t(p.n_q) + 1 && x.row_ptr.back() == x.nnz(),
        "index layout row pointers do not match " + std::to_string(p.n_q) + " queries");
  check(k.idx.size() + x.col.size() < std::numeric_limits<uint32_t>::max(),
        "index layout has too many entries for 32-bit offsets");
  k.idx_ptr.push_back(uint32_t(k.idx.size()));
  for (int i = 0; i < p.n_q; ++i) {
    for (int64_t e = x.row_ptr[i]; e < x.row_ptr[i + 1]; ++e) {
      int32_t j = x.col[size_t(e)];
      check(j >= 0 && j < p.n_k, "key index " + std::to_string(j) + " is out of range");
      if (uint32_t(j) < k.kend[size_t(i)]) k.idx.push_back(uint32_t(j));
    }
    k.idx_ptr.push_back(uint32_t(k.idx.size()));
  }
  double n = double(k.idx.size() - k.idx_ptr[k.idx_ptr.size() - size_t(p.n_q) - 1]);
  k.computed_entries += n * heads;
  k.kv_rows_read += n * heads;
}

// One head's lines as the lines kernel reads them: the columns, and only the offsets whose
// diagonal meets a key for some query (so every key qpos - offset the kernel forms fits in i32).
void add_lines(const Problem& p, const Layout& l, int h, KernelLayout& k, int heads) {
  const LineLayout& x = l.line(h);
  const int64_t qp_lo = p.qpos(0), qp_hi = p.qpos(p.n_q - 1);
  const uint32_t c0 = uint32_t(k.line_data.size());
  for (int32_t c : x.columns) {
    check(c >= 0 && c < p.n_k, "line column " + std::to_string(c) + " is out of range");
    k.line_data.push_back(c);
  }
  const uint32_t o0 = uint32_t(k.line_data.size());
  for (int64_t o : x.offsets)
    if (o <= qp_hi && o > qp_lo - p.n_k) k.line_data.push_back(int32_t(o));
  k.line_ptr.insert(k.line_ptr.end(), {c0, o0, o0, uint32_t(k.line_data.size())});
  const double n = double(layout_kept_entries(l, p, h));
  k.computed_entries += n * heads;
  k.kv_rows_read += n * heads;
}

}  // namespace

KernelLayout make_kernel_layout(const Problem& p, const Layout& l, int dense_rows, int only_head,
                                bool keep_lines) {
  KernelLayout k;
  k.kend = visible_prefix(p);
  const int heads = only_head >= 0 ? 1 : p.n_heads;
  switch (l.kind) {
    case Layout::Kind::Dense:
      add_dense(p, k, dense_rows, heads);
      break;
    case Layout::Kind::Blocks: {
      check(l.blocks.size() == 1 || int(l.blocks.size()) == p.n_heads,
            "block layout needs 1 or n_heads entries, has " + std::to_string(l.blocks.size()));
      if (only_head >= 0 || l.blocks.size() == 1) {
        add_blocks(p, l, l.block(std::max(only_head, 0)), k, heads, dense_rows);
      } else {
        k.n_layouts = p.n_heads;
        for (int h = 0; h < p.n_heads; ++h) add_blocks(p, l, l.block(h), k, 1, dense_rows);
      }
      break;
    }
    case Layout::Kind::Lines: {
      check(l.lines.size() == 1 || int(l.lines.size()) == p.n_heads,
            "line layout needs 1 or n_heads entries, has " + std::to_string(l.lines.size()));
      if (keep_lines && p.q_pos.empty() && p.k_pos.empty() && p.n_q > 0) {
        k.lines = true;
        if (only_head >= 0 || l.lines.size() == 1) {
          add_lines(p, l, std::max(only_head, 0), k, heads);
        } else {
          k.n_layouts = p.n_heads;
          for (int h = 0; h < p.n_heads; ++h) add_lines(p, l, h, k, 1);
        }
        break;
      }
      // Otherwise the lists the lines stand for (one head's when one runs).
      Layout listed;
      if (only_head >= 0) {
        listed.kind = Layout::Kind::Indices;
        listed.indices = {to_index_layout(l, p, only_head)};
      } else {
        listed = lines_to_indices(l, p);
      }
      k = make_kernel_layout(p, listed, dense_rows, only_head);
      break;
    }
    case Layout::Kind::Indices: {
      k.indices = true;
      check(l.indices.size() == 1 || int(l.indices.size()) == p.n_heads,
            "index layout needs 1 or n_heads entries, has " + std::to_string(l.indices.size()));
      if (only_head >= 0 || l.indices.size() == 1) {
        add_indices(p, l.index(std::max(only_head, 0)), k, heads);
      } else {
        k.n_layouts = p.n_heads;
        for (int h = 0; h < p.n_heads; ++h) add_indices(p, l.index(h), k, 1);
      }
      break;
    }
  }
  return k;
}

}  // namespace attn::vk
