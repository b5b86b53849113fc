#include "compute/variants/patterns/static_pattern.h"

#include <algorithm>

#include "compute/variants/util.h"

namespace attn {

double StaticPattern::predicted_density(const Problem& p) const {
  if (!detail::default_positions(p)) return -1;
  std::shared_ptr<const Mask> m = mask_for(p);
  int64_t kept = 0, visible = 0;
  for (int i = 0; i < p.n_q; ++i) {
    int64_t qp = p.qpos(i);
    kept += row_kept(p, *m, qp);
    visible += detail::last_key(p, qp) + 1 > 0 ? detail::last_key(p, qp) + 1 : 0;
  }
  return visible > 0 ? double(kept) / double(visible) : 1.0;
}

namespace {

// Entries a block kernel computes for a block layout: full tiles, causal-dead parts included.
int64_t block_work(const BlockLayout& b, const Problem& p) {
  int64_t work = 0;
  for (int r = 0; r < b.n_qb; ++r) {
    int64_t rows = std::min(b.bq, p.n_q - r * b.bq);
    for (int32_t e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e)
      work += rows * std::min(b.bk, p.n_k - b.col[e] * b.bk);
  }
  return work;
}

}  // namespace

Layout StaticPattern::select(const Problem& p, SelectStats* stats, SequenceState* seq) const {
  (void)stats;  // positions only: no floating-point work to count
  (void)seq;
  std::shared_ptr<const Mask> m = mask_for(p);
  Layout l;
  l.kind = Layout::Kind::Blocks;
  l.mask = m;
  l.blocks.push_back(block_layout_from_mask(*m, p, block_, block_));
  if (!allow_indices_) return l;

  double density = predicted_density(p);
  int64_t kept = density >= 0 ? int64_t(density * double(visible_entries(p)) + 0.5)
                              : layout_kept_entries(l, p, 0);
  if (double(block_work(l.blocks[0], p)) <= kIndexWasteRatio * double(kept)) return l;

  Layout x;
  x.kind = Layout::Kind::Indices;
  x.indices.emplace_back();
  if (!fast_indices(p, &x.indices[0])) x.indices[0] = to_index_layout(l, p, 0);
  return x;
}

}  // namespace attn
