// kv_recent(window): window attention over the cache, the last `window` tokens (the current one
// included) and nothing older (Xiao et al. 2023 use it as the baseline that fails once the first
// tokens leave).
#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_pieces.h"

namespace attn {

namespace {

class RecentEviction final : public KvEviction {
 public:
  explicit RecentEviction(const Params& p) : window_(int(p.at("window"))) {}
  int keep_after(int, int) const override { return window_ - 1; }
  std::vector<int> keep(int, int, KvHeadState& st, const float*, int, int, bool) const override {
    const int64_t t = st.pos.back();  // the next step is t + 1: it sees t + 2 - window .. t + 1
    std::vector<int> k;
    for (size_t e = 0; e < st.pos.size(); ++e)
      if (st.pos[e] >= t + 2 - window_) k.push_back(int(e));
    return k;
  }

 private:
  int window_;
};

VariantInfo recent_info() {
  return {"kv_recent",
          "Recent window",
          kKvEvictionFamily,
          "Xiao et al. 2023, Efficient Streaming Language Models with Attention Sinks",
          "Keeps the last `window` tokens, the current one included (window attention).",
          {kv_int_param("window", 1, kKvMaxLen, 256, "tokens seen per step, current included"),
           kv_reposition_param()}};
}

}  // namespace

const KvPieceFactory kKvRecent = {recent_info, kv_make_eviction<RecentEviction>, nullptr};

}  // namespace attn
