#include "compute/variants/selectors/selector_util.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "compute/cpu/gemm.h"
#include "compute/cpu/huge_pages.h"
#include "compute/variants/util.h"

namespace attn::detail {

int last_visible_key(const Problem& p, int i) {
  int32_t qp = p.qpos(i);
  if (p.k_pos.empty()) {
    int64_t j = std::min<int64_t>(qp, p.n_k - 1);
    return j < 0 ? -1 : int(j);
  }
  return int(std::upper_bound(p.k_pos.begin(), p.k_pos.end(), qp) - p.k_pos.begin()) - 1;
}

BlockGrid::BlockGrid(const Problem& p, int block) : b(block) {
  n_qb = (p.n_q + b - 1) / b;
  n_kb = (p.n_k + b - 1) / b;
  diag.resize(n_qb);
  n_vis.resize(n_qb);
  for (int r = 0; r < n_qb; ++r) {
    int last = last_visible_key(p, q1(r, p) - 1);
    if (p.causal) {
      diag[r] = last < 0 ? -1 : last / b;
      n_vis[r] = last < 0 ? 0 : last / b + 1;
    } else {
      diag[r] = last < 0 ? 0 : last / b;
      n_vis[r] = n_kb;
    }
  }
}

std::vector<double> mean_pool(const float* data, int n, int d, int block) {
  int nb = (n + block - 1) / block;
  std::vector<double> out(size_t(nb) * d, 0.0);
  for (int i = 0; i < n; ++i) {
    double* o = out.data() + size_t(i / block) * d;
    const float* x = data + size_t(i) * d;
    for (int t = 0; t < d; ++t) o[t] += x[t];
  }
  for (int c = 0; c < nb; ++c) {
    double inv = 1.0 / double(std::min(block, n - c * block));
    for (int t = 0; t < d; ++t) out[size_t(c) * d + t] *= inv;
  }
  return out;
}

std::vector<double> pooled_queries(const Problem& p, int h, int block, double* flops) {
  *flops += double(p.n_q) * p.d + double((p.n_q + block - 1) / block) * p.d;
  return mean_pool(p.q_row(h, 0), p.n_q, p.d, block);
}

std::vector<std::vector<double>> pooled_keys(const Problem& p, int block, double* flops) {
  std::vector<std::vector<double>> out;
  for (int g = 0; g < p.n_kv_heads; ++g) {
    *flops += double(p.n_k) * p.d + double((p.n_k + block - 1) / block) * p.d;
    out.push_back(mean_pool(p.k.data() + size_t(g) * p.n_k * p.d, p.n_k, p.d, block));
  }
  return out;
}

void gemm_abt(const float* a, int lda, const float* b, int ldb, float* c, int ldc, int m, int n,
              int k) {
  if (m <= 0 || n <= 0) return;
  cpu::GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.b_nk = true;
  g.c = c;
  g.ldc = ldc;
  if (cpu::sgemm(g, 1)) return;
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<RowMajor, 0, Stride>(c, m, n, Stride(ldc)).noalias() =
      Eigen::Map<const RowMajor, 0, Stride>(a, m, k, Stride(lda)) *
      Eigen::Map<const RowMajor, 0, Stride>(b, n, k, Stride(ldb)).transpose();
}

BlockLayout block_layout_from_rows(const std::vector<std::vector<int32_t>>& rows, int block,
                                   const Problem& p) {
  BlockLayout b;
  b.bq = b.bk = block;
  b.n_qb = int(rows.size());
  b.n_kb = (p.n_k + block - 1) / block;
  b.row_ptr.assign(rows.size() + 1, 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    b.col.insert(b.col.end(), rows[r].begin(), rows[r].end());
    b.row_ptr[r + 1] = int32_t(b.col.size());
  }
  b.full.assign(b.col.size(), 1);
  return b;
}

IndexLayout index_layout_from_rows(const std::vector<std::vector<int32_t>>& rows) {
  IndexLayout x;
  x.row_ptr.assign(rows.size() + 1, 0);
  size_t nnz = 0;  // reserved up front: growing col would copy and fault it in again and again
  for (const auto& r : rows) nnz += r.size();
  x.col.reserve(nnz);
  cpu::advise_huge_pages(x.col.data(), nnz * sizeof(int32_t));
  for (size_t i = 0; i < rows.size(); ++i) {
    x.col.insert(x.col.end(), rows[i].begin(), rows[i].end());
    x.row_ptr[i + 1] = int64_t(x.col.size());
  }
  return x;
}

}  // namespace attn::detail

namespace attn::detail {

double pooled_scoring_flops(const Problem& p, int block, int dot_len) {
  BlockGrid g(p, block);
  double pairs = 0;
  for (int r = 0; r < g.n_qb; ++r) pairs += g.n_vis[r];
  return double(p.n_heads) * (double(p.n_q) + g.n_qb) * p.d +
         double(p.n_kv_heads) * (double(p.n_k) + g.n_kb) * p.d +
         double(p.n_heads) * pairs * 2.0 * dot_len;
}

}  // namespace attn::detail

namespace attn::detail {

std::vector<std::vector<double>> log_visible_counts(const Problem& p, const BlockGrid& g) {
  std::vector<std::vector<double>> out(size_t(g.n_qb));
  for (int r = 0; r < g.n_qb; ++r) {
    int nv = g.n_vis[r];
    std::vector<double> count(size_t(nv), 0.0);
    if (!p.causal) {
      for (int c = 0; c < nv; ++c) count[c] = g.k1(c, p) - g.k0(c);
    } else {
      // Blocks wholly before the first query's frontier are fully visible to every query.
      int first = last_visible_key(p, g.q0(r));
      int rows = g.q1(r, p) - g.q0(r);
      for (int c = 0; c < nv; ++c) {
        if (g.k1(c, p) - 1 <= first) {
          count[c] = g.k1(c, p) - g.k0(c);
          continue;
        }
        for (int i = g.q0(r); i < g.q1(r, p); ++i) {
          int last = last_visible_key(p, i);
          if (last >= g.k0(c)) count[c] += std::min(last + 1, g.k1(c, p)) - g.k0(c);
        }
        count[c] /= rows;
      }
    }
    out[r].resize(size_t(nv));
    for (int c = 0; c < nv; ++c) out[r][c] = std::log(std::max(count[c], 1e-300));
  }
  return out;
}

void softmax_inplace(std::vector<double>& x) {
  if (x.empty()) return;
  double mx = *std::max_element(x.begin(), x.end()), sum = 0;
  for (auto& v : x) sum += (v = std::exp(v - mx));
  for (auto& v : x) v /= sum;
}

std::vector<float> lsh_rotation(int d, int buckets, uint64_t seed) {
  std::vector<float> rot(size_t(d) * size_t(std::max(1, buckets / 2)));
  SplitMix64 g(seed);
  for (float& x : rot) {  // Box-Muller
    const double u1 = std::max(g.uniform(), 1e-300), u2 = g.uniform();
    x = float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
  return rot;
}

int lsh_bucket(const float* x, int d, const std::vector<float>& rot, int buckets) {
  if (buckets == 1) return 0;
  const int half = buckets / 2;
  int best = 0;
  float top = -INFINITY;
  for (int b = 0; b < half; ++b) {
    float s = 0;
    for (int c = 0; c < d; ++c) s += x[c] * rot[size_t(c) * half + b];
    if (s > top) top = s, best = b;
    if (-s > top) top = -s, best = half + b;
  }
  return best;
}

}  // namespace attn::detail
