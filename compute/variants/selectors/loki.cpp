// Loki (Singhania, Subramanian, Bhatele 2024): keys live near a low-dimensional subspace, so
// scores estimated in the top `rank` principal directions of the keys pick nearly the same top-k
// keys as exact scores. Per head: the principal basis of the keys (eigenvectors of their
// covariance, largest first; the paper fits it offline on calibration data, here on the input),
// Q and K projected onto its first `rank` vectors, approximate scores q~.k~ in rank dimensions,
// the k largest per query kept (ties to the lower key index), then exact attention on them.
// With rank = d the basis is a rotation, the scores are exact, and the kept set is exact top-k.
// Selection costs rank/d of exact top-k's scoring plus the projections.
#include <Eigen/Dense>
#include <algorithm>

#include "compute/cpu/huge_pages.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/row_select.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

int visible(const Problem& p, int i) {
  return p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
}

class LokiPattern final : public Pattern {
 public:
  explicit LokiPattern(const Params& params)
      : rank_(int(params.at("rank"))), k_(int(params.at("k"))) {}
  VariantInfo info() const override { return kLokiPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    const int r = std::min(rank_, p.d);
    parallel_for(p.n_heads, [&](int h) {
      const Eigen::Map<const RowMatrix> k(p.k_row(h, 0), p.n_k, p.d), q(p.q_row(h, 0), p.n_q, p.d);
      // Principal directions of the keys (covariance in double), largest eigenvalue first.
      const Eigen::MatrixXd kd = k.cast<double>();
      const Eigen::RowVectorXd mean = kd.colwise().mean();
      const Eigen::MatrixXd centred = kd.rowwise() - mean;
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(centred.transpose() * centred);
      const Eigen::MatrixXf basis =
          eig.eigenvectors().rightCols(r).rowwise().reverse().cast<float>();
      const RowMatrix kr = k * basis, qr = q * basis;  // f32 [n, r]
      // Each row keeps min(k, visible) keys, so the list's offsets are known before any score.
      IndexLayout& x = l.indices[size_t(h)];
      x.row_ptr.assign(size_t(p.n_q) + 1, 0);
      for (int i = 0; i < p.n_q; ++i)
        x.row_ptr[size_t(i) + 1] = x.row_ptr[size_t(i)] + std::min(k_, std::max(0, visible(p, i)));
      x.col.resize(size_t(x.row_ptr.back()));
      // Approximate scores of 64 queries at a time (one product), then each row's top k.
      constexpr int kTile = 64;
      detail::RowScratch scratch;
      // One score tile for the widest query tile, sized once (huge pages): a tile resized as the
      // visible keys grow would be allocated and faulted in again for every tile.
      std::vector<float> s;
      cpu::resize_huge(s, size_t(kTile) * size_t(p.n_k));
      for (int i0 = 0; i0 < p.n_q; i0 += kTile) {
        const int i1 = std::min(i0 + kTile, p.n_q), nv_max = visible(p, i1 - 1);
        if (nv_max <= 0) continue;
        detail::gemm_abt(qr.row(i0).data(), r, kr.data(), r, s.data(), nv_max, i1 - i0, nv_max, r);
        for (int i = i0; i < i1; ++i)
          if (const int nv = visible(p, i); nv > 0)
            detail::top_keys(s.data() + size_t(i - i0) * size_t(nv_max), nv, k_, scratch,
                             x.col.data() + x.row_ptr[size_t(i)]);
      }
    });
    if (stats) stats->flops += predicted_select_flops(p);
    return l;
  }

  double predicted_density(const Problem& p) const override {
    int64_t kept = 0, visible = 0;
    for (int i = 0; i < p.n_q; ++i) {
      const int64_t nv = p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
      kept += std::min<int64_t>(k_, nv);
      visible += nv;
    }
    return visible > 0 ? double(kept) / double(visible) : 1.0;
  }

  double predicted_select_flops(const Problem& p) const override {
    const double r = std::min(rank_, p.d);
    // Covariance and projections, then rank-dimensional scores of every visible entry.
    return p.n_heads * (2.0 * p.n_k * p.d * p.d + 2.0 * (p.n_q + p.n_k) * p.d * r +
                        2.0 * r * double(visible_entries(p)));
  }

 private:
  int rank_, k_;
};

VariantInfo loki_info() {
  return {"loki",
          "Loki (low-rank keys)",
          "dynamic",
          "Singhania, Subramanian, Bhatele 2024, Loki: Low-Rank Keys for Efficient Sparse "
          "Attention",
          "Top-k keys chosen by scores in the keys' top principal directions, then exact "
          "attention on them; rank = d is exact top-k.",
          {int_param("rank", 1, 4096, 16, "principal directions used to score (clamped to d)"),
           int_param("k", 1, 1000000, 64, "keys kept per query")}};
}

}  // namespace

const PatternFactory kLokiPattern = {loki_info, make_from_params<Pattern, LokiPattern>};

}  // namespace attn
