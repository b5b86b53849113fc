// Exact per-query top-k (the oracle that sparse selectors approximate; Gupta et al. 2021): every
// visible score is computed (f32, as the kernels compute them, by a GEMM over query tiles), and
// each query keeps exactly min(k, visible keys) keys, ties to the lower key index.
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <functional>

#include "compute/variants/patterns.h"
#include "compute/variants/selector_util.h"

namespace attn {

namespace {

// Float bits mapped so that unsigned order equals numeric order.
inline uint32_t ordered_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

class TopkPattern final : public Pattern {
 public:
  explicit TopkPattern(int k) : k_(k) {}
  VariantInfo info() const override { return kTopkPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    constexpr int kTile = 64;  // queries scored per GEMM
    double flops = 0;
    Layout l;
    l.kind = Layout::Kind::Indices;
    std::vector<std::vector<int32_t>> rows(size_t(p.n_q));
    std::vector<uint64_t> order, all;
    RowMajor s;
    for (int h = 0; h < p.n_heads; ++h) {
      Eigen::Map<const RowMajor> q(p.q_row(h, 0), p.n_q, p.d), k(p.k_row(h, 0), p.n_k, p.d);
      for (int i0 = 0; i0 < p.n_q; i0 += kTile) {
        int i1 = std::min(i0 + kTile, p.n_q);
        int nv_max = p.causal ? detail::last_visible_key(p, i1 - 1) + 1 : p.n_k;
        if (nv_max > 0) s.noalias() = q.middleRows(i0, i1 - i0) * k.topRows(nv_max).transpose();
        for (int i = i0; i < i1; ++i) {
          int nv = p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
          const float* score = s.data() + size_t(i - i0) * size_t(s.cols());
          flops += 2.0 * p.d * nv;
          int take = std::min(k_, nv);
          // One integer key per key: larger score first, then lower index. For small k a
          // min-heap of the best `take` keys rejects most keys with one comparison.
          auto key = [&](int j) {
            return (uint64_t(ordered_bits(score[j])) << 32) | (0xFFFFFFFFu - uint32_t(j));
          };
          order.resize(size_t(take));
          if (take > 0 && take * 16 < nv) {
            for (int j = 0; j < take; ++j) order[j] = key(j);
            std::make_heap(order.begin(), order.end(), std::greater<uint64_t>());
            for (int j = take; j < nv; ++j) {
              uint64_t x = key(j);
              if (x <= order.front()) continue;
              std::pop_heap(order.begin(), order.end(), std::greater<uint64_t>());
              order.back() = x;
              std::push_heap(order.begin(), order.end(), std::greater<uint64_t>());
            }
          } else {
            all.resize(size_t(nv));
            for (int j = 0; j < nv; ++j) all[j] = key(j);
            std::nth_element(all.begin(), all.begin() + take, all.end(), std::greater<uint64_t>());
            std::copy(all.begin(), all.begin() + take, order.begin());
          }
          rows[i].resize(size_t(take));
          for (int t = 0; t < take; ++t) rows[i][t] = int32_t(0xFFFFFFFFu - uint32_t(order[t]));
          std::sort(rows[i].begin(), rows[i].end());
        }
      }
      l.indices.push_back(detail::index_layout_from_rows(rows));
    }
    if (stats) stats->flops += flops;
    return l;
  }

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

std::shared_ptr<const Pattern> make_topk(const Params& params) {
  return std::make_shared<TopkPattern>(int(params.at("k")));
}

}  // namespace

const PatternFactory kTopkPattern = {topk_info, make_topk};

}  // namespace attn
