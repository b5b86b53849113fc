#include "compute/layout.h"

#include <algorithm>
#include <functional>

#include "compute/error.h"
#include "compute/problem.h"

namespace attn {

namespace {

// Number of keys in [j0, j1) visible from query i (key positions increase, so a binary search).
int visible_in_range(const Problem& p, int i, int j0, int j1) {
  if (!p.causal) return j1 - j0;
  int32_t qp = p.qpos(i);
  int lo = j0, hi = j1;  // first j in [j0, j1) with kpos(j) > qp
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (p.kpos(mid) <= qp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - j0;
}

// Index of key block c in row r of a block layout, or -1.
int64_t find_block(const BlockLayout& b, int r, int c) {
  auto first = b.col.begin() + b.row_ptr[r], last = b.col.begin() + b.row_ptr[r + 1];
  auto it = std::lower_bound(first, last, c);
  return (it != last && *it == c) ? int64_t(it - b.col.begin()) : -1;
}

// Index of the key at position kp, or -1.
int key_at(const Problem& p, int64_t kp) {
  if (p.k_pos.empty()) return kp >= 0 && kp < p.n_k ? int(kp) : -1;
  auto it = std::lower_bound(p.k_pos.begin(), p.k_pos.end(), kp);
  return it != p.k_pos.end() && *it == kp ? int(it - p.k_pos.begin()) : -1;
}

// Offsets [first, last) of x whose key for query i is one of its nv visible keys: one run of
// the descending offsets with default key positions (key qp - o), found by two binary searches.
std::pair<size_t, size_t> visible_offsets(const LineLayout& x, const Problem& p, int i, int nv) {
  const int64_t qp = p.qpos(i);
  const auto b = x.offsets.begin();
  const auto first = std::lower_bound(b, x.offsets.end(), qp, std::greater<>());
  const auto last = std::lower_bound(first, x.offsets.end(), qp - int64_t(nv), std::greater<>());
  return {size_t(first - b), size_t(last - b)};
}

// Appends the kept keys of query i (nv visible keys) under lines x: its visible columns merged
// with its keys on the diagonals, both ascending, a key on both kept once.
void append_line_row(const LineLayout& x, const Problem& p, int i, int nv,
                     std::vector<int32_t>& out) {
  const int64_t qp = p.qpos(i);
  const int ncv = int(std::lower_bound(x.columns.begin(), x.columns.end(), nv) - x.columns.begin());
  const int32_t* a = x.columns.data();
  int ia = 0;
  auto put_diagonal_key = [&](int32_t j) {
    while (ia < ncv && a[ia] < j) out.push_back(a[ia++]);
    if (ia < ncv && a[ia] == j) ++ia;
    out.push_back(j);
  };
  if (p.k_pos.empty()) {
    const auto [first, last] = visible_offsets(x, p, i, nv);
    for (size_t o = first; o < last; ++o) put_diagonal_key(int32_t(qp - x.offsets[o]));
  } else {
    for (int64_t o : x.offsets) {
      const int j = key_at(p, qp - o);
      if (j >= 0 && j < nv) put_diagonal_key(j);
    }
  }
  out.insert(out.end(), a + ia, a + ncv);
}

// Kept entries of lines x: per query its visible columns and visible diagonal keys, less the
// keys on both. With default positions the keys on both are counted per (column, offset) pair:
// column c lies on diagonal o for the query at position kpos(c) + o, if there is one and it
// sees c.
int64_t line_kept_entries(const LineLayout& x, const Problem& p) {
  int64_t total = 0;
  const bool default_positions = p.q_pos.empty() && p.k_pos.empty();
  const size_t per_pair = x.columns.size() * x.offsets.size();
  if (!default_positions || per_pair > size_t(p.n_q) * (x.columns.size() + x.offsets.size())) {
    std::vector<int32_t> keys;
    for (int i = 0; i < p.n_q; ++i) {
      keys.clear();
      append_line_row(x, p, i, visible_in_range(p, i, 0, p.n_k), keys);
      total += int64_t(keys.size());
    }
    return total;
  }
  for (int i = 0; i < p.n_q; ++i) {
    const int nv = visible_in_range(p, i, 0, p.n_k);
    const auto [first, last] = visible_offsets(x, p, i, nv);
    total += int64_t(last - first) +
             (std::lower_bound(x.columns.begin(), x.columns.end(), nv) - x.columns.begin());
  }
  // Column c and offset o meet at query position c + o, which exists when it lies in
  // [qpos(0), qpos(n_q - 1)] and sees c (causal: o >= 0).
  const int64_t q_lo = p.qpos(0), q_hi = p.qpos(p.n_q - 1);
  for (int32_t c : x.columns) {
    const int64_t o_hi = q_hi - c, o_lo = p.causal ? std::max<int64_t>(q_lo - c, 0) : q_lo - c;
    if (o_lo > o_hi) continue;
    const auto first = std::lower_bound(x.offsets.begin(), x.offsets.end(), o_hi, std::greater<>());
    const auto last = std::lower_bound(first, x.offsets.end(), o_lo - 1, std::greater<>());
    total -= last - first;
  }
  return total;
}

}  // namespace

Layout head_layout(const Layout& l, int h) {
  Layout s;
  s.kind = l.kind;
  s.mask = l.mask;
  if (l.kind == Layout::Kind::Blocks) s.blocks = {l.block(h)};
  if (l.kind == Layout::Kind::Indices) s.indices = {l.index(h)};
  if (l.kind == Layout::Kind::Lines) s.lines = {l.line(h)};
  return s;
}

int64_t visible_entries(const Problem& p) {
  int64_t total = 0;
  for (int i = 0; i < p.n_q; ++i) total += visible_in_range(p, i, 0, p.n_k);
  return total;
}

bool layout_keeps(const Layout& l, const Problem& p, int h, int i, int j) {
  if (!p.visible(i, j)) return false;
  switch (l.kind) {
    case Layout::Kind::Dense:
      return true;
    case Layout::Kind::Blocks: {
      const BlockLayout& b = l.block(h);
      int64_t e = find_block(b, i / b.bq, j / b.bk);
      if (e < 0) return false;
      return b.full[e] || !l.mask || l.mask->keep(p.qpos(i), p.kpos(j));
    }
    case Layout::Kind::Indices: {
      const IndexLayout& x = l.index(h);
      auto first = x.col.begin() + x.row_ptr[i], last = x.col.begin() + x.row_ptr[i + 1];
      return std::binary_search(first, last, j);
    }
    case Layout::Kind::Lines: {
      const LineLayout& x = l.line(h);
      if (std::binary_search(x.columns.begin(), x.columns.end(), j)) return true;
      const int64_t o = int64_t(p.qpos(i)) - p.kpos(j);
      return std::binary_search(x.offsets.begin(), x.offsets.end(), o, std::greater<>()) &&
             key_at(p, p.kpos(j)) == j;
    }
  }
  return false;
}

void layout_row_keys(const Layout& l, const Problem& p, int h, int i, std::vector<int32_t>& out) {
  out.clear();
  switch (l.kind) {
    case Layout::Kind::Dense: {
      int n = visible_in_range(p, i, 0, p.n_k);
      for (int j = 0; j < n; ++j) out.push_back(j);
      break;
    }
    case Layout::Kind::Blocks: {
      const BlockLayout& b = l.block(h);
      int r = i / b.bq;
      int32_t qp = p.qpos(i);
      for (int32_t e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e) {
        int j0 = b.col[e] * b.bk, j1 = std::min(j0 + b.bk, p.n_k);
        int jv = j0 + visible_in_range(p, i, j0, j1);
        if (b.full[e] || !l.mask) {
          for (int j = j0; j < jv; ++j) out.push_back(j);
        } else if (p.k_pos.empty()) {  // keys at consecutive positions: the mask's own rule
          l.mask->append_kept(qp, j0, jv - j0, j0, out);
        } else {
          for (int j = j0; j < jv; ++j)
            if (l.mask->keep(qp, p.kpos(j))) out.push_back(j);
        }
      }
      break;
    }
    case Layout::Kind::Indices: {
      const IndexLayout& x = l.index(h);
      for (int64_t e = x.row_ptr[i]; e < x.row_ptr[i + 1]; ++e)
        if (p.visible(i, x.col[e])) out.push_back(x.col[e]);
      break;
    }
    case Layout::Kind::Lines:
      append_line_row(l.line(h), p, i, visible_in_range(p, i, 0, p.n_k), out);
      break;
  }
}

int64_t layout_kept_entries(const Layout& l, const Problem& p, int h) {
  if (l.kind == Layout::Kind::Dense) return visible_entries(p);
  int64_t total = 0;
  if (l.kind == Layout::Kind::Blocks) {
    const BlockLayout& b = l.block(h);
    for (int r = 0; r < b.n_qb; ++r) {
      int i0 = r * b.bq, i1 = std::min(i0 + b.bq, p.n_q);
      for (int32_t e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e) {
        int j0 = b.col[e] * b.bk, j1 = std::min(j0 + b.bk, p.n_k);
        for (int i = i0; i < i1; ++i) {
          int jv = j0 + visible_in_range(p, i, j0, j1);
          if (b.full[e] || !l.mask) {
            total += jv - j0;
          } else {
            int32_t qp = p.qpos(i);
            for (int j = j0; j < jv; ++j) total += l.mask->keep(qp, p.kpos(j));
          }
        }
      }
    }
    return total;
  }
  if (l.kind == Layout::Kind::Lines) return line_kept_entries(l.line(h), p);
  // Listed keys ascend and positions increase, so a row's visible keys are a prefix: the
  // keys below lim, the first key its query cannot see (walked once over the queries).
  const IndexLayout& x = l.index(h);
  int lim = p.causal ? 0 : p.n_k;
  for (int i = 0; i < p.n_q; ++i) {
    if (p.causal)
      while (lim < p.n_k && p.kpos(lim) <= p.qpos(i)) ++lim;
    const int32_t* first = x.col.data() + x.row_ptr[i];
    const int32_t* last = x.col.data() + x.row_ptr[i + 1];
    total += std::lower_bound(first, last, lim) - first;
  }
  return total;
}

IndexLayout to_index_layout(const Layout& l, const Problem& p, int h) {
  IndexLayout x;
  x.row_ptr.assign(size_t(p.n_q) + 1, 0);
  if (l.kind == Layout::Kind::Lines) {
    const LineLayout& lx = l.line(h);
    x.col.reserve(size_t(p.n_q) * (lx.columns.size() + lx.offsets.size()));
    for (int i = 0; i < p.n_q; ++i) {
      append_line_row(lx, p, i, visible_in_range(p, i, 0, p.n_k), x.col);
      x.row_ptr[size_t(i) + 1] = int64_t(x.col.size());
    }
    return x;
  }
  std::vector<int32_t> keys;
  for (int i = 0; i < p.n_q; ++i) {
    layout_row_keys(l, p, h, i, keys);
    x.col.insert(x.col.end(), keys.begin(), keys.end());
    x.row_ptr[i + 1] = int64_t(x.col.size());
  }
  return x;
}

Layout lines_to_indices(const Layout& l, const Problem& p) {
  if (l.kind != Layout::Kind::Lines) return l;
  Layout out;
  out.kind = Layout::Kind::Indices;
  out.indices.resize(l.lines.size());
  for (size_t h = 0; h < l.lines.size(); ++h) out.indices[h] = to_index_layout(l, p, int(h));
  return out;
}

BlockLayout block_layout_from_mask(const Mask& m, const Problem& p, int bq, int bk) {
  require(bq > 0 && bk > 0, ErrorCode::InvalidArgument, "block sizes must be positive");
  BlockLayout b;
  b.bq = bq;
  b.bk = bk;
  b.n_qb = (p.n_q + bq - 1) / bq;
  b.n_kb = (p.n_k + bk - 1) / bk;
  b.row_ptr.assign(size_t(b.n_qb) + 1, 0);
  for (int r = 0; r < b.n_qb; ++r) {
    int32_t q_lo = p.qpos(r * bq), q_hi = p.qpos(std::min((r + 1) * bq, p.n_q) - 1);
    for (int c = 0; c < b.n_kb; ++c) {
      int32_t k_lo = p.kpos(c * bk), k_hi = p.kpos(std::min((c + 1) * bk, p.n_k) - 1);
      if (p.causal && k_lo > q_hi) break;  // this and every later key block is in the future
      BlockClass cls = m.classify(q_lo, q_hi, k_lo, k_hi);
      if (cls == BlockClass::Empty) continue;
      b.col.push_back(c);
      b.full.push_back(cls == BlockClass::Full ? 1 : 0);
    }
    b.row_ptr[r + 1] = int32_t(b.col.size());
  }
  return b;
}

}  // namespace attn
