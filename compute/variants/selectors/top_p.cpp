// Top-p block selection in the manner of FlexPrefill (Lai et al. 2025): for each query block,
// estimate how the attention mass of its queries splits over key blocks from pooled queries and
// keys, and keep blocks in decreasing estimated mass until the kept mass reaches p. The estimate
// of block c for query block r is
//     m(r, c) = softmax_c( scale * qbar_r . kbar_c + log n(r, c) )
// over visible blocks, where n(r, c) is the mean number of keys of block c visible to the block's
// queries (so a block of n keys with equal scores weighs n times one key). The current block is
// kept first (its mass counts), then the others by decreasing mass (ties to the lower index)
// while the kept mass is below p.
#include <algorithm>
#include <cmath>

#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

class TopPPattern final : public Pattern {
 public:
  TopPPattern(int block, double p) : block_(block), p_(p) {}
  VariantInfo info() const override { return kTopPPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    double flops = 0;
    detail::BlockGrid g(p, block_);
    auto pk = detail::pooled_keys(p, block_, &flops);
    std::vector<std::vector<double>> log_count = detail::log_visible_counts(p, g);
    double scale = p.effective_scale();
    Layout l;
    l.kind = Layout::Kind::Blocks;
    std::vector<std::vector<int32_t>> rows(size_t(g.n_qb));
    std::vector<double> mass;
    std::vector<int32_t> order;
    for (int h = 0; h < p.n_heads; ++h) {
      auto pq = detail::pooled_queries(p, h, block_, &flops);
      const std::vector<double>& keys = pk[size_t(p.kv_head(h))];
      for (int r = 0; r < g.n_qb; ++r) {
        rows[r].clear();
        int nv = g.n_vis[r], diag = g.diag[r];
        if (nv == 0) continue;
        block_masses(pq.data() + size_t(r) * p.d, keys.data(), p.d, scale, log_count[r], mass);
        flops += (2.0 * p.d + 4.0) * nv;
        double kept = mass[diag];
        rows[r].push_back(diag);
        order.clear();
        for (int c = 0; c < nv; ++c)
          if (c != diag) order.push_back(c);
        std::sort(order.begin(), order.end(),
                  [&](int a, int b) { return mass[a] != mass[b] ? mass[a] > mass[b] : a < b; });
        for (size_t t = 0; t < order.size() && kept < p_; ++t) {
          rows[r].push_back(order[t]);
          kept += mass[order[t]];
        }
        std::sort(rows[r].begin(), rows[r].end());
      }
      l.blocks.push_back(detail::block_layout_from_rows(rows, block_, p));
    }
    if (stats) stats->flops += flops;
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    return detail::pooled_scoring_flops(p, block_, p.d + 2);
  }

  // Softmax over visible blocks of scale * qbar . kbar_c + log n(r, c).
  static void block_masses(const double* qbar, const double* kbar, int d, double scale,
                           const std::vector<double>& log_count, std::vector<double>& mass) {
    mass.resize(log_count.size());
    for (size_t c = 0; c < mass.size(); ++c)
      mass[c] = scale * detail::dot(qbar, kbar + c * size_t(d), d) + log_count[c];
    detail::softmax_inplace(mass);
  }

 private:
  int block_;
  double p_;
};

VariantInfo top_p_info() {
  return {"top_p",
          "Top-p blocks (FlexPrefill)",
          "dynamic",
          "Lai et al. 2025, FlexPrefill: A Context-Aware Sparse Attention "
          "Mechanism for Efficient Long-Sequence Inference",
          "Keeps, per query block, the fewest key blocks whose estimated attention mass reaches p.",
          {int_param("block", 1, 4096, 64, "block length in tokens (queries and keys)"),
           float_param("p", 0.01, 1.0, 0.9, "estimated attention mass to keep per query block")}};
}

std::shared_ptr<const Pattern> make_top_p(const Params& params) {
  return std::make_shared<TopPPattern>(int(params.at("block")), params.at("p"));
}

}  // namespace

const PatternFactory kTopPPattern = {top_p_info, make_top_p};

}  // namespace attn
