// HyperAttention (Han, Jayaram, Karbasi, Mirrokni, Woodruff, Zandieh 2024): the heavy entries
// are found by sortLSH and the rest estimated from sampled columns. Queries and keys of a head
// are hashed with the same angular LSH (`buckets` buckets, a seeded random rotation), each side
// is sorted by (bucket, position), and a query at sorted rank t keeps the keys at sorted ranks in
// its block [floor(t' / block) * block, ... + block) where t' = t * n_k / n_q (the block diagonal
// of the permuted matrix). Every query also keeps `samples` keys drawn uniformly with `seed`
// (shared by the queries of a head) and its last visible key. The causal rule then applies.
// HyperAttention reweights the sampled columns to estimate the mass it leaves out; here the kept
// entries are renormalised by the variant's normaliser like every other pattern's.
// Work: hashing O(N d buckets), two sorts O(N log N), attention O(N (block + samples) d).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

class HyperPattern final : public Pattern {
 public:
  HyperPattern(int buckets, int block, int samples, uint64_t seed)
      : buckets_(buckets), block_(block), samples_(samples), seed_(seed) {}
  VariantInfo info() const override { return kHyperPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    const std::vector<float> rot = detail::lsh_rotation(p.d, buckets_, seed_);
    parallel_for(p.n_heads, [&](int h) {
      // Sorted order of each side by (bucket, position).
      auto sorted = [&](int n, bool key) {
        std::vector<int> b(static_cast<size_t>(n)), order(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
          b[size_t(i)] =
              detail::lsh_bucket(key ? p.k_row(h, i) : p.q_row(h, i), p.d, rot, buckets_);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int x, int y) { return b[size_t(x)] < b[size_t(y)]; });
        return order;
      };
      const std::vector<int> qs = sorted(p.n_q, false), ks = sorted(p.n_k, true);
      // Sampled columns, shared by the head's queries.
      detail::SplitMix64 gs(detail::mix_seed(seed_, uint64_t(h) + 1));
      std::vector<int32_t> sampled;
      for (int s = 0; s < std::min(samples_, p.n_k); ++s)
        sampled.push_back(int32_t(gs.below(uint64_t(p.n_k))));
      std::vector<std::vector<int32_t>> rows(static_cast<size_t>(p.n_q));
      for (int t = 0; t < p.n_q; ++t) {
        const int i = qs[size_t(t)];
        const int64_t scaled = int64_t(t) * p.n_k / p.n_q;
        const int64_t b0 = scaled / block_ * block_, b1 = std::min<int64_t>(b0 + block_, p.n_k);
        std::vector<int32_t>& keep = rows[size_t(i)];
        for (int64_t r = b0; r < b1; ++r)
          if (p.visible(i, ks[size_t(r)])) keep.push_back(ks[size_t(r)]);
        for (int32_t j : sampled)
          if (p.visible(i, j)) keep.push_back(j);
        const int last = p.causal ? detail::last_visible_key(p, i) : -1;
        if (last >= 0) keep.push_back(last);
        std::sort(keep.begin(), keep.end());
        keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
      }
      l.indices[size_t(h)] = detail::index_layout_from_rows(rows);
    });
    if (stats) stats->flops += predicted_select_flops(p);
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    const double half = std::max(1, buckets_ / 2);
    return 2.0 * p.d * half * (double(p.n_heads) * p.n_q + double(p.n_heads) * p.n_k);
  }

 private:
  int buckets_, block_, samples_;
  uint64_t seed_;
};

VariantInfo hyper_info() {
  return {"hyper",
          "HyperAttention (sortLSH + samples)",
          "dynamic",
          "Han, Jayaram, Karbasi, Mirrokni, Woodruff, Zandieh 2024, HyperAttention: Long-context "
          "Attention in Near-Linear Time",
          "Queries and keys sorted by a shared angular LSH; each query keeps its block of the "
          "sorted keys plus sampled columns.",
          {int_param("buckets", 1, 4096, 16, "hash buckets (1 or even)"),
           int_param("block", 1, 1 << 30, 64, "keys per block of the sorted order"),
           int_param("samples", 0, 1 << 30, 32, "uniformly sampled keys per head"),
           int_param("seed", 0, 1000000000, 0, "random seed of the rotation and samples")}};
}

std::shared_ptr<const Pattern> make_hyper(const Params& params) {
  const int buckets = int(params.at("buckets"));
  if (buckets != 1 && buckets % 2 != 0)
    throw Error(ErrorCode::BadParameter,
                "hyper(buckets=" + std::to_string(buckets) +
                    "): must be 1 or even (angular LSH splits each random direction into two "
                    "buckets)");
  return std::make_shared<HyperPattern>(buckets, int(params.at("block")), int(params.at("samples")),
                                        uint64_t(params.at("seed")));
}

}  // namespace

const PatternFactory kHyperPattern = {hyper_info, make_hyper};

}  // namespace attn
