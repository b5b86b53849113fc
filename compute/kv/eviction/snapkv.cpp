// kv_snapkv(budget, window, kernel) and kv_pyramidkv(..., beta): prompt compression, once, after
// the prefill. The observation window (the last `window` prompt tokens) stays, with the earlier
// prompt keys its queries attend to most, scores max-pooled over `kernel` neighbours; decoding
// then appends without evicting. PyramidKV is SnapKV with per-layer budgets that fall linearly
// with depth (pyramid_layer_keep).
#include <algorithm>
#include <cmath>

#include "compute/kv/kv_evict.h"
#include "compute/kv/kv_pieces.h"

namespace attn {

int pyramid_layer_keep(int budget, int window, double beta, int layer, int n_layers) {
  const int avg = budget - window;
  const int min_keep = int(std::floor(avg / beta));
  const int max_keep = 2 * avg - min_keep;
  if (n_layers <= 1) return avg;
  const int step = (max_keep - min_keep) / (n_layers - 1);
  return max_keep - layer * step;
}

namespace {

class SnapEviction final : public KvEviction {
 public:
  // beta = 0: SnapKV (one budget); else PyramidKV.
  SnapEviction(int budget, int window, int kernel, double beta)
      : budget_(budget), window_(window), kernel_(kernel), beta_(beta) {}
  bool needs_scores() const override { return true; }
  bool prefill_only() const override { return true; }
  int keep_after(int layer, int n_layers) const override {
    if (beta_ == 0) return budget_ - 1;
    return window_ + std::max(0, pyramid_layer_keep(budget_, window_, beta_, layer, n_layers) - 1);
  }
  std::vector<int> keep(int layer, int n_layers, KvHeadState& st, const float* probs, int G, int nq,
                        bool first_pass) const override {
    const int n = int(st.pos.size());
    const int target = keep_after(layer, n_layers);
    if (!first_pass || n <= target) return kv_all(n);
    std::vector<int> keep = snap(target - std::min(window_, n), probs, G, nq, n);
    std::sort(keep.begin(), keep.end());
    return keep;
  }

 private:
  // The observation window (last `window` entries) plus the `select` earlier entries the
  // window's queries attend to most, scores max-pooled over `kernel` neighbours.
  std::vector<int> snap(int select, const float* probs, int G, int nq, int n) const {
    const int win = std::min(window_, n);
    const int prefix = n - win;
    const int obs = std::min(win, nq);  // window queries this pass has
    const std::vector<double> raw = kv_column_sums(probs, G, nq, n, nq - obs, nq);
    std::vector<double> pooled(static_cast<size_t>(prefix));
    const int half = kernel_ / 2;
    for (int e = 0; e < prefix; ++e) {
      double m = raw[size_t(e)];
      for (int j = std::max(0, e - half); j <= std::min(prefix - 1, e + half); ++j)
        m = std::max(m, raw[size_t(j)]);
      pooled[size_t(e)] = m;
    }
    std::vector<int> keep = kv_best(kv_all(prefix), pooled, size_t(std::max(0, select)));
    for (int e = prefix; e < n; ++e) keep.push_back(e);
    return keep;
  }

  int budget_, window_, kernel_;
  double beta_;
};

ParamSpec kernel_param() {
  return kv_int_param("kernel", 1, 1024, 7, "max-pool width over key scores (odd)");
}
ParamSpec window_param() {
  return kv_int_param("window", 1, kKvMaxLen, 32, "observation window: last prompt tokens");
}

VariantInfo snapkv_info() {
  return {"kv_snapkv",
          "SnapKV (prompt compression)",
          kKvEvictionFamily,
          "Li et al. 2024, SnapKV: LLM Knows What You are Looking for Before Generation",
          "Once, after the prefill: keeps the last `window` prompt tokens and the prompt keys "
          "they attend to most (max-pooled over `kernel`); decoding appends without evicting.",
          {kv_int_param("budget", 2, kKvMaxLen, 1024,
                        "prompt entries the first step sees, itself included"),
           window_param(), kernel_param(), kv_reposition_param()}};
}

VariantInfo pyramidkv_info() {
  return {
      "kv_pyramidkv",
      "PyramidKV (per-layer budgets)",
      kKvEvictionFamily,
      "Cai et al. 2024, PyramidKV: Dynamic KV Cache Compression based on Pyramidal "
      "Information Funneling",
      "SnapKV with budgets falling linearly with depth (lower layers keep more), "
      "`budget` on average.",
      {kv_int_param("budget", 2, kKvMaxLen, 1024, "average prompt entries per layer, as snapkv"),
       window_param(),
       kernel_param(),
       {"beta", ParamSpec::Type::Float, 1, 1000, 20, "top-to-bottom budget ratio", {}},
       kv_reposition_param()}};
}

std::shared_ptr<const KvEviction> make_snap(const std::string& id, const Params& p, double beta) {
  const int budget = int(p.at("budget")), window = int(p.at("window")),
            kernel = int(p.at("kernel"));
  kv_check(window < budget, id,
           "window (" + std::to_string(window) + ") must be smaller than budget (" +
               std::to_string(budget) + ")");
  kv_check(kernel % 2 == 1, id,
           "kernel must be odd (a centred pool), not " + std::to_string(kernel));
  return std::make_shared<SnapEviction>(budget, window, kernel, beta);
}

std::shared_ptr<const KvEviction> make_snapkv(const Params& p) {
  return make_snap("kv_snapkv", p, 0);
}
std::shared_ptr<const KvEviction> make_pyramidkv(const Params& p) {
  return make_snap("kv_pyramidkv", p, p.at("beta"));
}

}  // namespace

const KvPieceFactory kKvSnapKv = {snapkv_info, make_snapkv, nullptr};
const KvPieceFactory kKvPyramidKv = {pyramidkv_info, make_pyramidkv, nullptr};

}  // namespace attn
