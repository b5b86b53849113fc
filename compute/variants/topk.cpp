// Exact per-query top-k (the oracle that sparse selectors approximate; Gupta et al. 2021): every
// visible score is computed, and each query keeps exactly min(k, visible keys) keys, ties to the
// lower key index.
#include <algorithm>

#include "compute/variants/patterns.h"
#include "compute/variants/selector_util.h"

namespace attn {

namespace {

class TopkPattern final : public Pattern {
 public:
  explicit TopkPattern(int k) : k_(k) {}
  VariantInfo info() const override { return kTopkPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    double flops = 0;
    Layout l;
    l.kind = Layout::Kind::Indices;
    std::vector<std::vector<int32_t>> rows(size_t(p.n_q));
    std::vector<double> score;
    std::vector<int32_t> order;
    for (int h = 0; h < p.n_heads; ++h) {
      for (int i = 0; i < p.n_q; ++i) {
        int nv = p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
        score.resize(size_t(nv));
        order.resize(size_t(nv));
        for (int j = 0; j < nv; ++j) {
          score[j] = detail::dot(p.q_row(h, i), p.k_row(h, j), p.d);
          order[j] = j;
        }
        flops += 2.0 * p.d * nv;
        int take = std::min(k_, nv);
        std::nth_element(order.begin(), order.begin() + take, order.end(), [&](int a, int b) {
          return score[a] != score[b] ? score[a] > score[b] : a < b;
        });
        rows[i].assign(order.begin(), order.begin() + take);
        std::sort(rows[i].begin(), rows[i].end());
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
          {int_param("k", 1, 1 << 20, 64, "keys kept per query")}};
}

std::shared_ptr<const Pattern> make_topk(const Params& params) {
  return std::make_shared<TopkPattern>(int(params.at("k")));
}

}  // namespace

const PatternFactory kTopkPattern = {topk_info, make_topk};

}  // namespace attn
