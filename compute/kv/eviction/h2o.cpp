// kv_h2o(budget, recent): Heavy-Hitter Oracle. Each entry accumulates the attention it receives;
// the `recent` newest tokens stay and the budget's rest goes to the highest accumulated scores
// (the keys of the h2o(heavy=budget-recent,recent=recent-1) pattern).
#include <algorithm>

#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_pieces.h"

namespace attn {

namespace {

class H2oEviction final : public KvEviction {
 public:
  H2oEviction(int budget, int recent) : budget_(budget), recent_(recent) {}
  bool needs_scores() const override { return true; }
  int keep_after(int, int) const override { return budget_ - 1; }
  std::vector<int> keep(int, int, KvHeadState& st, const float* probs, int G, int nq,
                        bool) const override {
    const int n = int(st.pos.size());
    const int64_t t = st.pos.back();
    st.acc.resize(size_t(n), 0.0);
    const std::vector<double> s = kv_column_sums(probs, G, nq, n, 0, nq);
    for (int e = 0; e < n; ++e) st.acc[size_t(e)] += s[size_t(e)];
    // The next step's window is t + 2 - recent .. t + 1; older entries compete as heavy ones.
    std::vector<int> heavy, window;
    for (int e = 0; e < n; ++e)
      (st.pos[size_t(e)] >= t + 2 - recent_ ? window : heavy).push_back(e);
    std::vector<int> keep = kv_best(heavy, st.acc, size_t(budget_ - recent_));
    keep.insert(keep.end(), window.begin(), window.end());
    std::sort(keep.begin(), keep.end());
    return keep;
  }

 private:
  int budget_, recent_;
};

VariantInfo h2o_info() {
  return {"kv_h2o",
          "Heavy hitters (H2O)",
          kKvEvictionFamily,
          "Zhang et al. 2023, H2O: Heavy-Hitter Oracle for Efficient Generative Inference",
          "Keeps `recent` recent tokens and the budget's rest by accumulated attention; the "
          "keys of the h2o(heavy=budget-recent,recent=recent-1) pattern.",
          {kv_int_param("budget", 1, kKvMaxLen, 256, "entries seen per step, current included"),
           kv_int_param("recent", 1, kKvMaxLen, 128, "recent tokens kept, current included"),
           kv_reposition_param()}};
}

std::shared_ptr<const KvEviction> make_h2o(const Params& p) {
  const int budget = int(p.at("budget")), recent = int(p.at("recent"));
  kv_check(recent <= budget, "kv_h2o",
           "recent (" + std::to_string(recent) + ") must not exceed budget (" +
               std::to_string(budget) + ")");
  return std::make_shared<H2oEviction>(budget, recent);
}

}  // namespace

const KvPieceFactory kKvH2o = {h2o_info, make_h2o, nullptr};

}  // namespace attn
