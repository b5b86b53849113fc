#include "compute/probabilities.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "compute/error.h"
#include "compute/parallel.h"

namespace attn {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;

// Raw modified scores of queries [i0, i1) x keys [k0, k1) (f32 GEMM, then mods in float).
RowMatrix modified_scores(const Variant& v, const Problem& p, int h, int i0, int i1, int k0,
                          int k1) {
  ConstMap q(p.q_row(h, i0), i1 - i0, p.d);
  ConstMap k(p.k_row(h, k0), k1 - k0, p.d);
  RowMatrix s = (q * k.transpose()) * p.effective_scale();
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
  require(r.n_heads == p.n_heads && r.n_q == p.n_q &&
              r.row_stat.size() == size_t(p.n_heads) * p.n_q,
          ErrorCode::InvalidArgument, "probabilities: result does not belong to this problem");
}

// Selective attention's accumulated ReLU'd logits from rows [0, i0) over keys [k0, k1).
std::vector<double> selective_history(const Variant& v, const Problem& p, const Result& r, int h,
                                      int i0, int k0, int k1) {
  std::vector<double> acc(size_t(k1 - k0), 0.0);
  std::vector<int32_t> keys;
  const int chunk = 64;
  for (int a0 = 0; a0 < i0; a0 += chunk) {
    int a1 = std::min(a0 + chunk, i0);
    RowMatrix s = modified_scores(v, p, h, a0, a1, k0, k1);
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
  const int w = k1 - k0;
  out.assign(size_t(i1 - i0) * w, 0.0);
  if (i1 == i0 || w == 0) return;
  std::vector<double> acc;
  if (v.selective()) acc = selective_history(v, p, r, h, i0, k0, k1);
  std::vector<int32_t> keys;
  const int chunk = 64;
  for (int a0 = i0; a0 < i1; a0 += chunk) {
    int a1 = std::min(a0 + chunk, i1);
    RowMatrix s = modified_scores(v, p, h, a0, a1, k0, k1);
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

void probability_row(const Variant& v, const Problem& p, const Result& r, int h, int i, int k0,
                     int k1, std::vector<double>& out) {
  probability_block(v, p, r, h, i, i + 1, k0, k1, out);
}

Tile tile_probabilities(const Variant& v, const Problem& p, const Result& r, const TileRequest& t) {
  check_range(p, r, t.head, t.q0, t.q1, t.k0, t.k1);
  require(t.q1 > t.q0 && t.k1 > t.k0 && t.w > 0 && t.h > 0, ErrorCode::InvalidArgument,
          "tile query: empty tile or zero cells requested");
  Tile tile;
  tile.w = std::min(t.w, t.k1 - t.k0);
  tile.h = std::min(t.h, t.q1 - t.q0);
  tile.cells.assign(size_t(tile.w) * tile.h, 0.0f);
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
      double val = t.pool == Pool::Max ? pooled[x] : pooled[x] / (double(r1 - r0) * cols_in_cell[x]);
      tile.cells[size_t(y) * tile.w + x] = float(val);
    }
  };
  // Selective rows depend on all earlier rows: one pass is cheaper than replaying per cell row.
  parallel_for(tile.h, cell_row, v.selective() ? 1 : 0);
  return tile;
}

}  // namespace attn
