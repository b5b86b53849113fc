#include "compute/probabilities.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "compute/approximation.h"
#include "compute/cpu/gemm.h"
#include "compute/error.h"
#include "compute/parallel.h"

namespace attn {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;

// Raw modified scores of queries [i0, i1) x keys [k0, k1) (f32 GEMM, then mods in float), from
// Q and K as the result's kernels stored them (Stats::precision): a bf16 run's probabilities are
// those of its bf16 rows.
RowMatrix modified_scores(const Variant& v, const Problem& p, const Result& r, int h, int i0,
                          int i1, int k0, int k1) {
  ConstMap q(p.q_row(h, i0), i1 - i0, p.d);
  ConstMap k(p.k_row(h, k0), k1 - k0, p.d);
  RowMatrix s;
  if (const Precision prec = r.stats.precision; prec != Precision::F32) {
    const auto stored = [prec](float x) { return round_to(prec, x); };
    const RowMatrix qs = q.unaryExpr(stored), ks = k.unaryExpr(stored);
    s = (qs * ks.transpose()) * p.effective_scale();
  } else {
    s = (q * k.transpose()) * p.effective_scale();
  }
  if (!v.mods().empty())
    for (int a = 0; a < i1 - i0; ++a)
      for (int b = 0; b < k1 - k0; ++b)
        s(a, b) = apply_score_mods(v.mods(), s(a, b), h, p.n_heads, p.qpos(i0 + a), p.kpos(k0 + b));
  return s;
}

void check_range(const Problem& p, const Result& r, int h, int i0, int i1, int k0, int k1) {
  require(h >= 0 && h < p.n_heads && 0 <= i0 && i0 <= i1 && i1 <= p.n_q && 0 <= k0 && k0 <= k1 &&
              k1 <= p.n_k,
          ErrorCode::InvalidArgument,
          "probabilities: head " + std::to_string(h) + ", rows [" + std::to_string(i0) + ", " +
              std::to_string(i1) + "), keys [" + std::to_string(k0) + ", " + std::to_string(k1) +
              ") out of range for " + std::to_string(p.n_heads) + " heads x " +
              std::to_string(p.n_q) + " x " + std::to_string(p.n_k));
  require(
      r.n_heads == p.n_heads && r.n_q == p.n_q && r.row_stat.size() == size_t(p.n_heads) * p.n_q,
      ErrorCode::InvalidArgument, "probabilities: result does not belong to this problem");
}

constexpr int kPacket = 16;  // floats in a 64-byte line (an AVX-512 packet)

// Selective attention's accumulated ReLU'd logits from rows [0, i0) over keys [k0, k1).
std::vector<double> selective_history(const Variant& v, const Problem& p, const Result& r, int h,
                                      int i0, int k0, int k1) {
  std::vector<double> acc(size_t(k1 - k0), 0.0);
  std::vector<int32_t> keys;
  const int chunk = 64;
  for (int a0 = 0; a0 < i0; a0 += chunk) {
    int a1 = std::min(a0 + chunk, i0);
    RowMatrix s = modified_scores(v, p, r, h, a0, a1, k0, k1);
    for (int i = a0; i < a1; ++i) {
      layout_row_keys(r.layout, p, h, i, keys);
      int32_t qp = p.qpos(i);
      for (int32_t j : keys) {
        if (j < k0 || j >= k1) continue;
        int32_t kp = p.kpos(j);
        double x = s(i - a0, j - k0);
        if (kp != qp && kp != 0 && x > 0) acc[j - k0] += x;
      }
    }
  }
  return acc;
}

}  // namespace

void probability_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                       int k0, int k1, std::vector<double>& out) {
  check_range(p, r, h, i0, i1, k0, k1);
  if (const Approximation* a = v.approximation()) {
    a->implied_block(v, p, r, h, i0, i1, k0, k1, out);
    return;
  }
  const int w = k1 - k0;
  out.assign(size_t(i1 - i0) * w, 0.0);
  if (i1 == i0 || w == 0) return;
  std::vector<double> acc;
  if (v.selective()) acc = selective_history(v, p, r, h, i0, k0, k1);
  std::vector<int32_t> keys;
  const int chunk = 64;
  for (int a0 = i0; a0 < i1; a0 += chunk) {
    int a1 = std::min(a0 + chunk, i1);
    RowMatrix s = modified_scores(v, p, r, h, a0, a1, k0, k1);
    for (int i = a0; i < a1; ++i) {
      layout_row_keys(r.layout, p, h, i, keys);
      const double stat = r.row_stat[size_t(h) * p.n_q + i];
      double* row = out.data() + size_t(i - i0) * w;
      auto first = std::lower_bound(keys.begin(), keys.end(), k0);
      for (auto it = first; it != keys.end() && *it < k1; ++it) {
        double x = s(i - a0, *it - k0);
        if (v.selective()) x -= acc[*it - k0];
        row[*it - k0] = normalised_prob(v.normaliser(), x, stat, p.n_k);
      }
      if (v.selective()) {
        int32_t qp = p.qpos(i);
        for (auto it = first; it != keys.end() && *it < k1; ++it) {
          int32_t kp = p.kpos(*it);
          double x = s(i - a0, *it - k0);
          if (kp != qp && kp != 0 && x > 0) acc[*it - k0] += x;
        }
      }
    }
  }
}

bool plain_softmax(const Variant& v) {
  return !v.approximation() && !v.selective() && v.mods().empty() &&
         v.normaliser().kind == Normaliser::Kind::Softmax;
}

void softmax_rows(const Problem& p, const Result& r, int h, int i0, int i1, SoftmaxRows& out) {
  check_range(p, r, h, i0, i1, 0, p.n_k);
  const int rows = i1 - i0, n_k = p.n_k;
  // Rows of the same shape as the last call's are zero outside that call's span: only the span
  // is cleared (a window's few hundred keys of each row, not all n_k).
  const size_t cells = size_t(rows) * size_t(n_k);
  if (out.p.size() == cells && out.n_k == n_k) {
    for (int a = 0; a < rows && out.hi > out.lo; ++a)
      std::fill_n(out.p.data() + size_t(a) * size_t(n_k) + out.lo, out.hi - out.lo, 0.0);
  } else {
    out.p.assign(cells, 0.0);
  }
  out.i0 = i0;
  out.i1 = i1;
  out.n_k = n_k;
  out.lo = out.hi = 0;
  out.mass.assign(size_t(rows), 0.0);
  out.a_log_a.assign(size_t(rows), 0.0);
  if (rows == 0 || n_k == 0) return;
  const bool dense = r.layout.kind == Layout::Kind::Dense;
  const bool prefix = p.causal && p.q_pos.empty() && p.k_pos.empty();  // visible: a prefix
  // Keys [lo, hi) hold every kept key of the rows: a pattern's kept keys first (a window's few
  // hundred instead of the whole prefix), a dense causal block's prefix up to its last query.
  int lo = 0, hi = n_k;
  if (!dense) {
    out.keys.clear();
    out.start.assign(size_t(rows) + 1, 0);
    lo = n_k, hi = 0;
    for (int i = i0; i < i1; ++i) {
      layout_row_keys(r.layout, p, h, i, out.row_keys);  // ascending, visible
      out.keys.insert(out.keys.end(), out.row_keys.begin(), out.row_keys.end());
      out.start[size_t(i - i0) + 1] = int64_t(out.keys.size());
      if (!out.row_keys.empty())
        lo = std::min(lo, out.row_keys.front()), hi = std::max(hi, out.row_keys.back() + 1);
    }
  } else if (prefix) {
    hi = std::clamp(p.qpos(i1 - 1) + 1, 0, n_k);
  }
  if (hi <= lo) return;  // nothing kept
  out.lo = lo;
  out.hi = hi;
  // Rows of the scores and the exponentials start on 64-byte lines and run to a whole number of
  // 16-float packets, so that Eigen's vectorised exp covers a row without scalar head or tail
  // (its scalar loop calls expf entry by entry). The padding is never read as a probability.
  const auto padded = [](int n) { return (n + kPacket - 1) / kPacket * kPacket; };
  const int w = hi - lo, ws = padded(w);
  out.scores.resize(size_t(rows) * size_t(ws));
  out.exps.resize(size_t(ws));
  float* const sc = out.scores.data();
  float* const ex = out.exps.data();
  using Padded = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;
  Eigen::Map<RowMatrix, Eigen::Aligned64, Eigen::OuterStride<>> s(sc, rows, w,
                                                                  Eigen::OuterStride<>(ws));
  // q k straight into the rows (a scaled product would go through a column-major temporary);
  // the scale is applied with the log-sum-exp below.
  s.noalias() = ConstMap(p.q_row(h, i0), rows, p.d) * ConstMap(p.k_row(h, lo), w, p.d).transpose();
  for (int a = 0; a < rows; ++a) std::fill(sc + size_t(a) * ws + w, sc + size_t(a + 1) * ws, 0.f);
  const float scale = p.effective_scale();
  // Exponentials in f32, stored in double; a dense row's sums in f32 too (Eigen's vectorised
  // reductions, as compare() takes them), a pattern's over its kept keys in double.
  for (int i = i0; i < i1; ++i) {
    const size_t a = size_t(i - i0);
    const float lse = r.row_stat[size_t(h) * p.n_q + size_t(i)];
    double* o = out.p.data() + a * size_t(n_k);
    float* x = sc + a * size_t(ws);  // log a = s - lse, over keys [lo, hi)
    if (dense) {                     // lo = 0
      const int end = prefix ? std::clamp(p.qpos(i) + 1, 0, hi) : hi;
      if (end == 0) continue;
      Padded(x, padded(end)) = Padded(x, padded(end)) * scale - lse;
      if (p.causal && !prefix)
        for (int j = 0; j < end; ++j)
          if (!p.visible(i, j)) x[j] = -1e30f;  // exp gives 0, and 0 * x stays 0
      Padded(ex, padded(end)) = Padded(x, padded(end)).exp();
      const auto xs = Eigen::Map<const Eigen::ArrayXf>(x, end);
      const auto es = Eigen::Map<const Eigen::ArrayXf>(ex, end);
      out.mass[a] = es.sum();
      out.a_log_a[a] = (es * xs).sum();
      for (int j = 0; j < end; ++j) o[j] = double(ex[j]);
      continue;
    }
    Padded(x, ws) = Padded(x, ws) * scale - lse;
    Padded(ex, ws) = Padded(x, ws).exp();
    double mass = 0, a_log_a = 0;
    for (int64_t c = out.start[a]; c < out.start[a + 1]; ++c) {
      const int32_t j = out.keys[size_t(c)] - lo;
      o[j + lo] = double(ex[j]);
      mass += double(ex[j]);
      a_log_a += double(ex[j]) * double(x[j]);
    }
    out.mass[a] = mass;
    out.a_log_a[a] = a_log_a;
  }
}

void probability_row(const Variant& v, const Problem& p, const Result& r, int h, int i, int k0,
                     int k1, std::vector<double>& out) {
  probability_block(v, p, r, h, i, i + 1, k0, k1, out);
}

namespace {

// Max pooling, the renderer's case: every normaliser is non-decreasing in the score for a fixed
// row statistic, so the largest probability of a cell row is the normaliser of that row's largest
// kept score. Scores are pooled per row and cell; one normalisation per row and cell follows.
// Dense layouts take float GEMMs over key blocks, limited to the keys a causal row can see;
// sparse layouts compute only their kept entries. Work follows what is visible and kept, not
// the tile's full extent (a 32K-token view is ~N^2 d / 2 flops dense and ~N k d sparse).
class MaxTile {
 public:
  MaxTile(const Variant& v, const Problem& p, const Result& r, const TileRequest& t, Tile& tile)
      : v_(v), p_(p), r_(r), t_(t), tile_(tile) {
    const int nk = t.k1 - t.k0;
    col0_.resize(size_t(tile.w) + 1);
    for (int x = 0; x <= tile.w; ++x) col0_[size_t(x)] = t.k0 + int(int64_t(x) * nk / tile.w);
    cell_of_.resize(size_t(nk));
    for (int x = 0; x < tile.w; ++x)
      for (int c = col0_[size_t(x)]; c < col0_[size_t(x) + 1]; ++c) cell_of_[size_t(c - t.k0)] = x;
    // Default positions: row i sees keys [0, n_k - n_q + i] under the causal rule.
    default_pos_ = p.q_pos.empty() && p.k_pos.empty();
  }

  void cell_row(int y) const {
    const int nq = t_.q1 - t_.q0;
    const int r0 = t_.q0 + int(int64_t(y) * nq / tile_.h);
    const int r1 = t_.q0 + int(int64_t(y + 1) * nq / tile_.h);
    std::vector<double> cell(size_t(tile_.w), 0.0);
    std::vector<float> best(size_t(tile_.w));
    auto flush_row = [&](int i) {
      const double stat = r_.row_stat[size_t(t_.head) * p_.n_q + size_t(i)];
      for (int x = 0; x < tile_.w; ++x)
        if (best[size_t(x)] > -std::numeric_limits<float>::infinity())
          cell[size_t(x)] = std::max(
              cell[size_t(x)], normalised_prob(v_.normaliser(), best[size_t(x)], stat, p_.n_k));
    };
    if (r_.layout.kind == Layout::Kind::Dense)
      dense_rows(r0, r1, best, flush_row);
    else
      sparse_rows(r0, r1, best, flush_row);
    for (int x = 0; x < tile_.w; ++x)
      tile_.cells[size_t(y) * tile_.w + size_t(x)] = float(cell[size_t(x)]);
  }

 private:
  // s[:, 0:b1-b0] = q K[b0:b1]^T: the AVX-512 SGEMM on one thread (cell rows are the parallel
  // unit) where the CPU has it, else Eigen.
  void scores(const RowMatrix& q, int b0, int b1, RowMatrix& s) const {
    cpu::GemmArgs g;
    g.m = int(q.rows());
    g.n = b1 - b0;
    g.k = p_.d;
    g.a = q.data();
    g.lda = p_.d;
    g.b = p_.k_row(t_.head, b0);
    g.ldb = p_.d;
    g.b_nk = true;
    g.c = s.data();
    g.ldc = int(s.cols());
    if (cpu::sgemm(g, 1)) return;
    s.topLeftCorner(q.rows(), b1 - b0).noalias() =
        q * ConstMap(p_.k_row(t_.head, b0), b1 - b0, p_.d).transpose();
  }

  // One past the last key row i may see within the tile (causal, default positions), else k1.
  int visible_end(int i) const {
    if (!p_.causal) return t_.k1;
    return std::clamp(p_.qpos(i) + 1, t_.k0, t_.k1);
  }

  template <class Flush>
  void dense_rows(int r0, int r1, std::vector<float>& best, const Flush& flush_row) const {
    const float scale = p_.effective_scale();
    const int chunk = 64, kblock = 1024;
    std::vector<std::vector<float>> rows_best;
    RowMatrix s(chunk, kblock);  // once per cell row: a fresh block per chunk faults its pages
    for (int a0 = r0; a0 < r1; a0 += chunk) {
      const int a1 = std::min(a0 + chunk, r1);
      const int kend = default_pos_ ? visible_end(a1 - 1) : t_.k1;
      rows_best.assign(
          size_t(a1 - a0),
          std::vector<float>(size_t(tile_.w), -std::numeric_limits<float>::infinity()));
      // Scaled once per chunk, so the GEMM's output is the score itself.
      const RowMatrix q = ConstMap(p_.q_row(t_.head, a0), a1 - a0, p_.d) * scale;
      for (int b0 = t_.k0; b0 < kend; b0 += kblock) {
        const int b1 = std::min(b0 + kblock, kend);
        scores(q, b0, b1, s);
        for (int a = 0; a < a1 - a0; ++a) {
          const int i = a0 + a;
          const int lim = default_pos_ ? std::min(b1, visible_end(i)) : b1;
          float* row = s.data() + size_t(a) * size_t(kblock);
          std::vector<float>& rb = rows_best[size_t(a)];
          if (!v_.mods().empty() || !default_pos_) {
            for (int j = b0; j < lim; ++j) {
              if (!default_pos_ && !p_.visible(i, j)) continue;
              float x = row[j - b0];
              if (!v_.mods().empty())
                x = apply_score_mods(v_.mods(), x, t_.head, p_.n_heads, p_.qpos(i), p_.kpos(j));
              float& c = rb[size_t(cell_of_[size_t(j - t_.k0)])];
              c = std::max(c, x);
            }
            continue;
          }
          // Contiguous segments per cell: a vectorised max over each.
          for (int x = cell_of_[size_t(b0 - t_.k0)]; x < tile_.w && col0_[size_t(x)] < lim; ++x) {
            const int c0 = std::max(col0_[size_t(x)], b0), c1 = std::min(col0_[size_t(x) + 1], lim);
            if (c1 <= c0) continue;
            const float m = Eigen::Map<const Eigen::VectorXf>(row + (c0 - b0), c1 - c0).maxCoeff();
            rb[size_t(x)] = std::max(rb[size_t(x)], m);
          }
        }
      }
      for (int a = 0; a < a1 - a0; ++a) {
        best = rows_best[size_t(a)];
        flush_row(a0 + a);
      }
    }
  }

  template <class Flush>
  void sparse_rows(int r0, int r1, std::vector<float>& best, const Flush& flush_row) const {
    const float scale = p_.effective_scale();
    std::vector<int32_t> keys;
    Eigen::VectorXf run;
    for (int i = r0; i < r1; ++i) {
      std::fill(best.begin(), best.end(), -std::numeric_limits<float>::infinity());
      layout_row_keys(r_.layout, p_, t_.head, i, keys);
      const Eigen::Map<const Eigen::VectorXf> qi(p_.q_row(t_.head, i), p_.d);
      auto it = std::lower_bound(keys.begin(), keys.end(), t_.k0);
      while (it != keys.end() && *it < t_.k1) {
        // Kept keys come in runs (blocks, windows): one matrix-vector product per run.
        auto end = it + 1;
        while (end != keys.end() && *end < t_.k1 && *end == *(end - 1) + 1) ++end;
        const int j0 = *it, len = int(end - it);
        run.noalias() = ConstMap(p_.k_row(t_.head, j0), len, p_.d) * qi;
        for (int e = 0; e < len; ++e) {
          const int j = j0 + e;
          float x = run[e] * scale;
          if (!v_.mods().empty())
            x = apply_score_mods(v_.mods(), x, t_.head, p_.n_heads, p_.qpos(i), p_.kpos(j));
          float& c = best[size_t(cell_of_[size_t(j - t_.k0)])];
          c = std::max(c, x);
        }
        it = end;
      }
      flush_row(i);
    }
  }

  const Variant& v_;
  const Problem& p_;
  const Result& r_;
  const TileRequest& t_;
  Tile& tile_;
  std::vector<int> col0_;     // [w + 1]: first key column of each cell
  std::vector<int> cell_of_;  // [k1 - k0]: cell of each key column
  bool default_pos_ = true;
};

}  // namespace

Tile tile_probabilities(const Variant& v, const Problem& p, const Result& r, const TileRequest& t) {
  check_range(p, r, t.head, t.q0, t.q1, t.k0, t.k1);
  require(t.q1 > t.q0 && t.k1 > t.k0 && t.w > 0 && t.h > 0, ErrorCode::InvalidArgument,
          "tile query: empty tile or zero cells requested");
  Tile tile;
  tile.w = std::min(t.w, t.k1 - t.k0);
  tile.h = std::min(t.h, t.q1 - t.q0);
  tile.cells.assign(size_t(tile.w) * tile.h, 0.0f);
  if (t.pool == Pool::Max && !v.selective() && !v.approximation()) {
    const MaxTile m(v, p, r, t, tile);
    parallel_for(tile.h, [&](int y) { m.cell_row(y); });
    return tile;
  }
  const int nq = t.q1 - t.q0, nk = t.k1 - t.k0;
  // Column -> cell x, with floor boundaries k0 + x*nk/w.
  std::vector<int> cell_of_col(nk);
  std::vector<int> cols_in_cell(tile.w, 0);
  for (int x = 0; x < tile.w; ++x) {
    int c0 = int(int64_t(x) * nk / tile.w), c1 = int(int64_t(x + 1) * nk / tile.w);
    for (int c = c0; c < c1; ++c) cell_of_col[c] = x;
    cols_in_cell[x] = c1 - c0;
  }
  auto cell_row = [&](int y) {
    int r0 = t.q0 + int(int64_t(y) * nq / tile.h), r1 = t.q0 + int(int64_t(y + 1) * nq / tile.h);
    std::vector<double> block;
    std::vector<double> pooled(tile.w, 0.0);
    const int chunk = 64;
    for (int a0 = r0; a0 < r1; a0 += chunk) {
      int a1 = std::min(a0 + chunk, r1);
      probability_block(v, p, r, t.head, a0, a1, t.k0, t.k1, block);
      for (int a = 0; a < a1 - a0; ++a)
        for (int c = 0; c < nk; ++c) {
          double x = block[size_t(a) * nk + c];
          double& cell = pooled[cell_of_col[c]];
          cell = t.pool == Pool::Max ? std::max(cell, x) : cell + x;
        }
    }
    for (int x = 0; x < tile.w; ++x) {
      double val =
          t.pool == Pool::Max ? pooled[x] : pooled[x] / (double(r1 - r0) * cols_in_cell[x]);
      tile.cells[size_t(y) * tile.w + x] = float(val);
    }
  };
  // Selective rows depend on all earlier rows: one pass is cheaper than replaying per cell row.
  parallel_for(tile.h, cell_row, v.selective() ? 1 : 0);
  return tile;
}

}  // namespace attn
