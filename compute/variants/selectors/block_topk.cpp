// Block top-k in the manner of MoBA (Lu et al. 2025) and Quest (Tang et al. 2024): keys are
// mean-pooled per block, each query block's mean query scores every visible key block, and the
// query block keeps
//     {current block} U {the k best-scoring other visible key blocks}
// (ties to the lower block index), i.e. exactly min(k + 1, visible blocks) blocks. The current
// block is the key block holding the last visible key of the block's last query (the diagonal
// block when n_q == n_k); visible blocks are those with a key visible from that query.
#include <algorithm>
#include <numeric>

#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

class BlockTopkPattern final : public Pattern {
 public:
  BlockTopkPattern(int block, int k) : block_(block), k_(k) {}
  VariantInfo info() const override { return kBlockTopkPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    double flops = 0;
    detail::BlockGrid g(p, block_);
    auto pk = detail::pooled_keys(p, block_, &flops);
    Layout l;
    l.kind = Layout::Kind::Blocks;
    std::vector<std::vector<int32_t>> rows(size_t(g.n_qb));
    std::vector<double> score;
    std::vector<int32_t> order;
    for (int h = 0; h < p.n_heads; ++h) {
      auto pq = detail::pooled_queries(p, h, block_, &flops);
      const std::vector<double>& keys = pk[size_t(p.kv_head(h))];
      for (int r = 0; r < g.n_qb; ++r) {
        rows[r].clear();
        int nv = g.n_vis[r], diag = g.diag[r];
        if (nv == 0) continue;
        score.resize(size_t(nv));
        for (int c = 0; c < nv; ++c)
          score[c] = detail::dot(pq.data() + size_t(r) * p.d, keys.data() + size_t(c) * p.d, p.d);
        flops += 2.0 * p.d * nv;
        order.clear();
        for (int c = 0; c < nv; ++c)
          if (c != diag) order.push_back(c);
        int take = std::min<int>(k_, int(order.size()));
        std::partial_sort(order.begin(), order.begin() + take, order.end(), [&](int a, int b) {
          return score[a] != score[b] ? score[a] > score[b] : a < b;
        });
        rows[r].assign(order.begin(), order.begin() + take);
        rows[r].push_back(diag);
        std::sort(rows[r].begin(), rows[r].end());
      }
      l.blocks.push_back(detail::block_layout_from_rows(rows, block_, p));
    }
    if (stats) stats->flops += flops;
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    return detail::pooled_scoring_flops(p, block_, p.d);
  }

  PatternDescription describe() const override {
    return {PatternDescription::Kind::BlockTopk, k_, block_};
  }

 private:
  int block_, k_;
};

VariantInfo block_topk_info() {
  return {
      "block_topk",
      "Block top-k (MoBA / Quest)",
      "dynamic",
      "Lu et al. 2025, MoBA: Mixture of Block Attention for Long-Context LLMs; Tang et al. 2024, "
      "Quest: Query-Aware Sparsity for Efficient Long-Context LLM Inference",
      "Mean-pooled query block scores mean-pooled key blocks; keeps the current block plus the "
      "k best others.",
      {int_param("block", 1, 4096, 64, "block length in tokens (queries and keys)"),
       int_param("k", 0, 1 << 16, 8, "key blocks kept per query block besides the current one")}};
}

std::shared_ptr<const Pattern> make_block_topk(const Params& params) {
  return std::make_shared<BlockTopkPattern>(int(params.at("block")), int(params.at("k")));
}

}  // namespace

const PatternFactory kBlockTopkPattern = {block_topk_info, make_block_topk};

}  // namespace attn
