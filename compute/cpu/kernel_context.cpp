#include "compute/cpu/kernel_context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "compute/error.h"
#include "compute/parallel.h"

namespace attn::cpu {

KernelContext::KernelContext(const Problem& p_, const Layout& layout_, const KernelSpec& spec_,
                             int width, float* o_, float* row_stat_, Precision prec_)
    : p(p_), layout(layout_), spec(spec_), o(o_), row_stat(row_stat_), prec(prec_) {
  H = p.n_heads;
  n_q = p.n_q;
  n_k = p.n_k;
  d = p.d;
  dv = (d + width - 1) / width * width;
  scale = p.effective_scale();
  qpos.resize(n_q);
  kpos.resize(n_k);
  for (int i = 0; i < n_q; ++i) qpos[i] = p.qpos(i);
  for (int j = 0; j < n_k; ++j) kpos[j] = p.kpos(j);
  // Positions increase, so the keys a query sees causally form a prefix; walk both lists once.
  lim.resize(n_q);
  int j = 0;
  for (int i = 0; i < n_q; ++i) {
    if (!p.causal) {
      lim[i] = n_k;
      continue;
    }
    while (j < n_k && kpos[j] <= qpos[i]) ++j;
    lim[i] = j;
  }
  if (dv == d || half()) {  // 16-bit V rows are padded to dv when converted
    v_base_ = p.v.data();
    v_ld_ = size_t(d);
  } else {
    v_pad_.assign(size_t(p.n_kv_heads) * n_k * dv, 0.0f);
    for (size_t r = 0; r < size_t(p.n_kv_heads) * n_k; ++r)
      std::copy_n(p.v.data() + r * d, d, v_pad_.data() + r * dv);
    v_base_ = v_pad_.data();
    v_ld_ = size_t(dv);
    bytes += int64_t(v_pad_.size() + p.v.size()) * 4;
  }
}

bool KernelContext::base2_softmax() const {
  return spec.mods.empty() && !spec.selective && spec.norm.kind == Normaliser::Kind::Softmax;
}

namespace {

// True when keys[0..n) rise strictly and lie in [0, n_k): eight at a time, each against the key
// before it (index layouts run to hundreds of millions of keys; one compare and branch per key
// made this check a tenth of a dense kernel's time).
bool row_keys_ok(const int32_t* keys, int64_t n, int32_t n_k) {
  using v8 = int32_t __attribute__((vector_size(32)));
  if (n == 0) return true;
  if (keys[0] < 0 || keys[n - 1] >= n_k) return false;  // ascending: the ends bound the rest
  v8 bad = {};
  int64_t e = 1;
  for (; e + 8 <= n; e += 8) {
    v8 cur, before;
    std::memcpy(&cur, keys + e, sizeof cur);
    std::memcpy(&before, keys + e - 1, sizeof before);
    bad |= cur <= before;
  }
  int32_t any = 0;
  for (; e < n; ++e) any |= keys[e] <= keys[e - 1];
  for (int k = 0; k < 8; ++k) any |= bad[k];
  return any == 0;
}

}  // namespace

void KernelContext::make_vt_lazy(std::function<void(int g, int j0, int j1)> fill) {
  vt_fill_ = std::move(fill);
  vt_blocks_ = (n_k + kVtBlock - 1) / kVtBlock;
  const size_t n = size_t(p.n_kv_heads) * size_t(vt_blocks_);
  vt_state_ = std::make_unique<std::atomic<uint8_t>[]>(n);
  for (size_t b = 0; b < n; ++b) vt_state_[b].store(0, std::memory_order_relaxed);
}

void KernelContext::ensure_vt(int h, int j0, int j1) {
  if (!vt_state_) return;
  const int g = p.kv_head(h);
  j1 = std::min(j1, n_k);
  for (int b = std::max(j0, 0) / kVtBlock; b * kVtBlock < j1; ++b) {
    std::atomic<uint8_t>& st = vt_state_[size_t(g) * vt_blocks_ + b];
    if (st.load(std::memory_order_acquire) == 2) continue;
    uint8_t empty = 0;
    if (st.compare_exchange_strong(empty, 1, std::memory_order_acq_rel)) {
      vt_fill_(g, b * kVtBlock, std::min(n_k, (b + 1) * kVtBlock));
      st.store(2, std::memory_order_release);
    } else {
      while (st.load(std::memory_order_acquire) != 2) std::this_thread::yield();
    }
  }
}

void check_layout(const Layout& l, const Problem& p) {
  auto fail = [](const std::string& m) { throw Error(ErrorCode::InvalidArgument, "layout: " + m); };
  auto count_ok = [&](size_t n) { return n == 1 || n == size_t(p.n_heads); };
  if (l.kind == Layout::Kind::Blocks) {
    if (!count_ok(l.blocks.size()))
      fail("block layout has " + std::to_string(l.blocks.size()) +
           " entries, expected 1 or n_heads = " + std::to_string(p.n_heads));
    for (size_t h = 0; h < l.blocks.size(); ++h) {
      const BlockLayout& b = l.blocks[h];
      const std::string at = "block layout " + std::to_string(h) + ": ";
      if (b.bq <= 0 || b.bk <= 0) fail(at + "block sizes must be positive");
      if (b.n_qb != (p.n_q + b.bq - 1) / b.bq || b.n_kb != (p.n_k + b.bk - 1) / b.bk)
        fail(at + "n_qb/n_kb (" + std::to_string(b.n_qb) + "/" + std::to_string(b.n_kb) +
             ") do not match n_q/n_k with bq/bk = " + std::to_string(b.bq) + "/" +
             std::to_string(b.bk));
      if (b.row_ptr.size() != size_t(b.n_qb) + 1 || b.row_ptr.front() != 0 ||
          b.row_ptr.back() != int32_t(b.col.size()) || b.full.size() != b.col.size())
        fail(at + "row_ptr/col/full sizes are inconsistent");
      for (int r = 0; r < b.n_qb; ++r) {
        if (b.row_ptr[r + 1] < b.row_ptr[r])
          fail(at + "row_ptr decreases at row " + std::to_string(r));
        for (int e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e) {
          if (b.col[e] < 0 || b.col[e] >= b.n_kb)
            fail(at + "key block " + std::to_string(b.col[e]) + " out of range in row " +
                 std::to_string(r));
          if (e > b.row_ptr[r] && b.col[e] <= b.col[e - 1])
            fail(at + "key blocks not ascending in row " + std::to_string(r));
        }
      }
    }
  } else if (l.kind == Layout::Kind::Indices) {
    if (!count_ok(l.indices.size()))
      fail("index layout has " + std::to_string(l.indices.size()) +
           " entries, expected 1 or n_heads = " + std::to_string(p.n_heads));
    // Heads in parallel: index layouts run to hundreds of millions of entries.
    parallel_for(int(l.indices.size()), [&](int hi) {
      const size_t h = size_t(hi);
      const IndexLayout& x = l.indices[h];
      const std::string at = "index layout " + std::to_string(h) + ": ";
      if (x.row_ptr.size() != size_t(p.n_q) + 1 || x.row_ptr.front() != 0 ||
          x.row_ptr.back() != int64_t(x.col.size()))
        fail(at + "row_ptr must have n_q + 1 entries from 0 to nnz");
      for (int i = 0; i < p.n_q; ++i) {
        if (x.row_ptr[i + 1] < x.row_ptr[i])
          fail(at + "row_ptr decreases at query " + std::to_string(i));
        if (row_keys_ok(x.col.data() + x.row_ptr[i], x.row_ptr[i + 1] - x.row_ptr[i], p.n_k))
            [[likely]]
          continue;
        int32_t prev = -1;  // the first fault, named
        for (int64_t e = x.row_ptr[i]; e < x.row_ptr[i + 1]; ++e) {
          const int32_t j = x.col[e];
          if (j < 0 || j >= p.n_k)
            fail(at + "key " + std::to_string(j) + " out of range for query " + std::to_string(i));
          if (j <= prev) fail(at + "keys not ascending for query " + std::to_string(i));
          prev = j;
        }
      }
    });
  } else if (l.kind == Layout::Kind::Lines) {
    if (!count_ok(l.lines.size()))
      fail("line layout has " + std::to_string(l.lines.size()) +
           " entries, expected 1 or n_heads = " + std::to_string(p.n_heads));
    for (size_t h = 0; h < l.lines.size(); ++h) {
      const LineLayout& x = l.lines[h];
      const std::string at = "line layout " + std::to_string(h) + ": ";
      for (size_t e = 0; e < x.columns.size(); ++e) {
        if (x.columns[e] < 0 || x.columns[e] >= p.n_k)
          fail(at + "column " + std::to_string(x.columns[e]) + " out of range");
        if (e > 0 && x.columns[e] <= x.columns[e - 1]) fail(at + "columns not ascending");
      }
      // Positions are int32, so no query and key are further apart than 2^32 - 1.
      for (size_t e = 0; e < x.offsets.size(); ++e) {
        if (std::abs(x.offsets[e]) >= (int64_t(1) << 32))
          fail(at + "offset " + std::to_string(x.offsets[e]) + " beyond any position difference");
        if (e > 0 && x.offsets[e] >= x.offsets[e - 1]) fail(at + "offsets not descending");
      }
    }
  }
}

}  // namespace attn::cpu
