// Exact per-query top-k (the oracle that sparse selectors approximate; Gupta et al. 2021): every
// visible score is computed (f32, as the kernels compute them, by a GEMM over query tiles), and
// each query keeps exactly min(k, visible keys) keys, ties to the lower key index.
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "compute/cpu/gemm.h"
#include "compute/cpu/huge_pages.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/row_select.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

int visible(const Problem& p, int i) {
  return p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
}

// Unscaled scores Q[i0:i1] K[0:nv]^T of head h (a positive scale changes no order), rows nv
// apart: the AVX-512 GEMM where the CPU has it, else Eigen.
void scores(const Problem& p, int h, int i0, int i1, int nv, float* out) {
  cpu::GemmArgs g;
  g.m = i1 - i0;
  g.n = nv;
  g.k = p.d;
  g.a = p.q_row(h, i0);
  g.lda = p.d;
  g.b = p.k_row(h, 0);
  g.ldb = p.d;
  g.b_nk = true;
  g.c = out;
  g.ldc = nv;
  if (cpu::sgemm(g, 1)) return;
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<RowMajor>(out, i1 - i0, nv).noalias() =
      Eigen::Map<const RowMajor>(p.q_row(h, i0), i1 - i0, p.d) *
      Eigen::Map<const RowMajor>(p.k_row(h, 0), nv, p.d).transpose();
}

class TopkPattern final : public Pattern {
 public:
  explicit TopkPattern(const Params& params) : k_(int(params.at("k"))) {}
  VariantInfo info() const override { return kTopkPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    constexpr int kTile = 64;  // queries scored per GEMM
    const int tiles = (p.n_q + kTile - 1) / kTile;
    // Each row keeps min(k, visible) keys: the CSR offsets are known before any score is.
    IndexLayout shape;
    shape.row_ptr.assign(size_t(p.n_q) + 1, 0);
    double flops = 0;
    for (int i = 0; i < p.n_q; ++i) {
      const int nv = visible(p, i);
      shape.row_ptr[size_t(i) + 1] = shape.row_ptr[size_t(i)] + std::min(k_, nv);
      flops += 2.0 * p.d * nv * p.n_heads;
    }
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    // Heads' key lists (hundreds of MiB at long inputs) allocated and first touched in parallel:
    // fresh pages cost far more to fault in than to fill on some hosts.
    parallel_for(p.n_heads, [&](int h) {
      IndexLayout& x = l.indices[size_t(h)];
      x.row_ptr = shape.row_ptr;
      cpu::resize_huge(x.col, size_t(shape.row_ptr.back()));
    });
    // (head, query tile) items in parallel: each scores its rows with one GEMM and selects row
    // by row. Each worker sizes its score tile once, for the widest tile, with huge pages:
    // growing it, or a fresh one per head, would fault it in again each time.
    const int workers = std::max(1, std::min(thread_count(), p.n_heads * tiles));
    std::atomic<int> next{0};
    parallel_for(
        workers,
        [&](int) {
          std::vector<float> s;
          cpu::resize_huge(s, size_t(kTile) * size_t(p.n_k));
          detail::RowScratch scratch;
          for (int item = next++; item < p.n_heads * tiles; item = next++) {
            const int h = item / tiles, t = item % tiles;
            IndexLayout& x = l.indices[size_t(h)];
            const int i0 = t * kTile, i1 = std::min(i0 + kTile, p.n_q);
            const int nv_max = visible(p, i1 - 1);
            if (nv_max > 0) scores(p, h, i0, i1, nv_max, s.data());
            for (int i = i0; i < i1; ++i)
              detail::top_keys(s.data() + size_t(i - i0) * size_t(nv_max), visible(p, i), k_,
                               scratch, x.col.data() + x.row_ptr[size_t(i)]);
          }
        },
        workers);
    if (stats) stats->flops += flops;
    return l;
  }

  PatternDescription describe() const override { return {PatternDescription::Kind::Topk, k_, 0}; }

  double predicted_density(const Problem& p) const override {
    int64_t kept = 0, visible = 0;
    for (int i = 0; i < p.n_q; ++i) {
      int64_t nv = p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
      kept += std::min<int64_t>(k_, nv);
      visible += nv;
    }
    return visible > 0 ? double(kept) / double(visible) : 1.0;
  }

  double predicted_select_flops(const Problem& p) const override {
    return 2.0 * p.d * double(visible_entries(p)) * p.n_heads;
  }

 private:
  int k_;
};

VariantInfo topk_info() {
  return {"topk",
          "Exact top-k (oracle)",
          "dynamic",
          "Gupta, Dar, Goodman, Ciprut, Berant 2021, Memory-efficient Transformers via Top-k "
          "Attention",
          "Computes every score and keeps each query's k largest: the upper bound for k-key "
          "selectors.",
          {int_param("k", 1, 1000000, 64, "keys kept per query")}};
}

}  // namespace

const PatternFactory kTopkPattern = {topk_info, make_from_params<Pattern, TopkPattern>};

}  // namespace attn
