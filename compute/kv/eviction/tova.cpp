// kv_tova(budget): Token Omission Via Attention. Once the cache is full, each step drops the
// entry the current query attends to least, wherever it is (no protected window).
#include <algorithm>

#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_pieces.h"

namespace attn {

namespace {

class TovaEviction final : public KvEviction {
 public:
  explicit TovaEviction(const Params& p) : budget_(int(p.at("budget"))) {}
  bool needs_scores() const override { return true; }
  int keep_after(int, int) const override { return budget_ - 1; }
  std::vector<int> keep(int, int, KvHeadState& st, const float* probs, int G, int nq,
                        bool) const override {
    const int n = int(st.pos.size());
    const std::vector<double> s = kv_column_sums(probs, G, nq, n, nq - 1, nq);
    std::vector<int> keep = kv_best(kv_all(n), s, size_t(budget_ - 1));
    std::sort(keep.begin(), keep.end());
    return keep;
  }

 private:
  int budget_;
};

VariantInfo tova_info() {
  return {"kv_tova",
          "Token omission via attention (TOVA)",
          kKvEvictionFamily,
          "Oren et al. 2024, Transformers are Multi-State RNNs",
          "When full, drops the entry the current query attends to least (any entry).",
          {kv_int_param("budget", 1, kKvMaxLen, 256, "entries seen per step, current included"),
           kv_reposition_param()}};
}

}  // namespace

const KvPieceFactory kKvTova = {tova_info, kv_make_eviction<TovaEviction>, nullptr};

}  // namespace attn
