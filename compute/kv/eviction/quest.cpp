// kv_quest(page, k): query-aware page selection. Nothing is evicted; each decode step attends to
// the `k` pages of `page` entries whose per-channel key bounds give the highest score bound, the
// newest page always.
#include <algorithm>

#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_pieces.h"

namespace attn {

namespace {

class QuestEviction final : public KvEviction {
 public:
  explicit QuestEviction(const Params& p) : page_(int(p.at("page"))), k_(int(p.at("k"))) {}
  bool evicts() const override { return false; }
  bool selects() const override { return true; }
  std::vector<int> select(const float* q, int G, const float* keys, int n, int d) const override {
    const int pages = (n + page_ - 1) / page_;
    std::vector<int> chosen;
    if (pages <= k_) {
      chosen = kv_all(pages);
    } else {
      std::vector<double> bound(static_cast<size_t>(pages), 0.0);
      std::vector<float> lo(static_cast<size_t>(d)), hi(static_cast<size_t>(d));
      for (int pg = 0; pg + 1 < pages; ++pg) {  // the newest page is taken anyway
        const int e0 = pg * page_, e1 = std::min(n, e0 + page_);
        std::copy_n(keys + size_t(e0) * d, d, lo.begin());
        std::copy_n(keys + size_t(e0) * d, d, hi.begin());
        for (int e = e0 + 1; e < e1; ++e)
          for (int c = 0; c < d; ++c) {
            lo[size_t(c)] = std::min(lo[size_t(c)], keys[size_t(e) * d + c]);
            hi[size_t(c)] = std::max(hi[size_t(c)], keys[size_t(e) * d + c]);
          }
        double b = 0;
        for (int g = 0; g < G; ++g)
          for (int c = 0; c < d; ++c) {
            const double qc = q[size_t(g) * d + c];
            b += std::max(qc * lo[size_t(c)], qc * hi[size_t(c)]);
          }
        bound[size_t(pg)] = b;
      }
      chosen = kv_best(kv_all(pages - 1), bound, size_t(k_ - 1));
      chosen.push_back(pages - 1);
      std::sort(chosen.begin(), chosen.end());
    }
    std::vector<int> entries;
    for (int pg : chosen)
      for (int e = pg * page_; e < std::min(n, (pg + 1) * page_); ++e) entries.push_back(e);
    return entries;
  }

 private:
  int page_, k_;
};

VariantInfo quest_info() {
  return {"kv_quest",
          "Quest (query-aware pages)",
          kKvEvictionFamily,
          "Tang et al. 2024, Quest: Query-Aware Sparsity for Efficient Long-Context LLM "
          "Inference",
          "Evicts nothing; each decode step attends to the `k` pages of `page` entries whose "
          "per-channel key bounds give the highest score bound (the current page always).",
          {kv_int_param("page", 1, 4096, 16, "entries per page"),
           kv_int_param("k", 1, kKvMaxLen, 16, "pages attended per step, current page included"),
           kv_reposition_param()}};
}

}  // namespace

const KvPieceFactory kKvQuest = {quest_info, kv_make_eviction<QuestEviction>, nullptr};

}  // namespace attn
