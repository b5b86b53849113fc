// Heavy-hitter oracle (H2O, Zhang et al. 2023) simulated over the queries in order, as decoding
// would meet them. Query i's current key t is its last visible key (position <= its position).
// Its cache is
//     recent window {t - recent, ..., t}  U  heavy set H,
// where H holds keys older than the window that were not evicted. Before the query attends,
// keys that left the window join H and, while |H| > heavy, the key of H with the lowest
// accumulated attention is evicted (ties: the newer key goes, so with no history the earliest
// tokens stay, as sinks would). The query then attends to its cache with a softmax and every
// cached key accumulates the probability it received. Each row keeps at most
// heavy + recent + 1 keys. H2O is a decoding policy: on bidirectional problems it still keeps
// only keys at or before the query's position.
#include <algorithm>
#include <cmath>

#include "compute/variants/patterns.h"
#include "compute/variants/selector_util.h"

namespace attn {

namespace {

class H2oPattern final : public Pattern {
 public:
  H2oPattern(int heavy, int recent) : heavy_(heavy), recent_(recent) {}
  VariantInfo info() const override { return kH2oPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    double flops = 0;
    Layout l;
    l.kind = Layout::Kind::Indices;
    for (int h = 0; h < p.n_heads; ++h) l.indices.push_back(select_head(p, h, &flops));
    if (stats) stats->flops += flops;
    return l;
  }

  // Exact ahead of time: the heavy set is always as full as the arrived keys allow.
  double predicted_density(const Problem& p) const override {
    double kept = 0;
    for (int i = 0; i < p.n_q; ++i) kept += double(row_budget(p, i));
    int64_t visible = visible_entries(p);
    return visible > 0 ? kept / double(visible) : 1.0;
  }

  double predicted_select_flops(const Problem& p) const override {
    double kept = 0;
    for (int i = 0; i < p.n_q; ++i) kept += double(row_budget(p, i));
    return double(p.n_heads) * kept * (2.0 * p.d + 5.0);
  }

 private:
  int64_t row_budget(const Problem& p, int i) const {
    int64_t t = detail::last_visible_key(p, i);
    if (t < 0) return 0;
    return std::min<int64_t>(heavy_, std::max<int64_t>(0, t - recent_)) +
           std::min<int64_t>(recent_ + 1, t + 1);
  }

  IndexLayout select_head(const Problem& p, int h, double* flops) const {
    double scale = p.effective_scale();
    std::vector<double> acc(size_t(p.n_k), 0.0);
    std::vector<int32_t> heavy;  // keys older than the window still cached
    int32_t next_old = 0;        // keys below this have left the window already
    std::vector<std::vector<int32_t>> rows(size_t(p.n_q));
    std::vector<double> prob;
    for (int i = 0; i < p.n_q; ++i) {
      int t = detail::last_visible_key(p, i);
      if (t < 0) continue;
      int window_lo = std::max(0, t - recent_);
      for (; next_old < window_lo; ++next_old) heavy.push_back(next_old);
      while (int(heavy.size()) > heavy_) {
        size_t worst = 0;
        for (size_t e = 1; e < heavy.size(); ++e)
          if (acc[heavy[e]] <= acc[heavy[worst]]) worst = e;  // ties: the later (newer) key
        heavy.erase(heavy.begin() + std::ptrdiff_t(worst));
      }
      std::vector<int32_t>& cache = rows[i];
      cache = heavy;  // ascending: keys join in index order and erase keeps the order
      for (int j = window_lo; j <= t; ++j) cache.push_back(j);

      prob.resize(cache.size());
      double mx = -INFINITY, sum = 0;
      for (size_t e = 0; e < cache.size(); ++e) {
        prob[e] = scale * detail::dot(p.q_row(h, i), p.k_row(h, cache[e]), p.d);
        mx = std::max(mx, prob[e]);
      }
      for (auto& x : prob) sum += (x = std::exp(x - mx));
      for (size_t e = 0; e < cache.size(); ++e) acc[cache[e]] += prob[e] / sum;
      *flops += double(cache.size()) * (2.0 * p.d + 5.0);
    }
    return detail::index_layout_from_rows(rows);
  }

  int heavy_, recent_;
};

VariantInfo h2o_info() {
  return {"h2o",
          "Heavy hitters (H2O)",
          "dynamic",
          "Zhang et al. 2023, H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large "
          "Language Models",
          "Simulated KV cache: recent keys plus the `heavy` keys with the most accumulated "
          "attention.",
          {int_param("heavy", 0, 1000000, 64, "heavy-hitter keys kept beyond the recent window"),
           int_param("recent", 0, 1000000, 64, "most recent keys kept besides the current one")}};
}

std::shared_ptr<const Pattern> make_h2o(const Params& params) {
  return std::make_shared<H2oPattern>(int(params.at("heavy")), int(params.at("recent")));
}

}  // namespace

const PatternFactory kH2oPattern = {h2o_info, make_h2o};

}  // namespace attn
