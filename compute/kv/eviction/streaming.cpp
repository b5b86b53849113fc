// kv_streaming(sinks, window): StreamingLLM's cache, the first `sinks` tokens (attention sinks)
// kept for ever plus the last `window`, the current one included; the keys of the sinks_window
// pattern.
#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_pieces.h"

namespace attn {

namespace {

class StreamingEviction final : public KvEviction {
 public:
  explicit StreamingEviction(const Params& p)
      : sinks_(int(p.at("sinks"))), window_(int(p.at("window"))) {}
  int keep_after(int, int) const override { return sinks_ + window_ - 1; }
  std::vector<int> keep(int, int, KvHeadState& st, const float*, int, int, bool) const override {
    const int64_t t = st.pos.back();  // the next step is t + 1
    std::vector<int> k;
    for (size_t e = 0; e < st.pos.size(); ++e)
      if (st.pos[e] < sinks_ || st.pos[e] >= t + 2 - window_) k.push_back(int(e));
    return k;
  }

 private:
  int sinks_, window_;
};

VariantInfo streaming_info() {
  return {
      "kv_streaming",
      "Sinks + window (StreamingLLM)",
      kKvEvictionFamily,
      "Xiao et al. 2023, Efficient Streaming Language Models with Attention Sinks",
      "Keeps the first `sinks` tokens and the last `window`, the current one included.",
      {kv_int_param("sinks", 0, kKvMaxLen, 4, "first tokens kept for ever"),
       kv_int_param("window", 1, kKvMaxLen, 252, "recent tokens seen per step, current included"),
       kv_reposition_param()}};
}

}  // namespace

const KvPieceFactory kKvStreaming = {streaming_info, kv_make_eviction<StreamingEviction>, nullptr};

}  // namespace attn
