// LSH attention (Reformer, Kitaev, Kaiser, Levskaya 2020): angular locality-sensitive hashing
// shared by queries and keys. Each round draws a random Gaussian rotation R [d, buckets/2] and
// hashes x to argmax([x R, -x R]) (one bucket when buckets = 1). Queries and keys of a head are
// sorted together by (bucket, position), the sorted sequence is cut into chunks of `chunk`
// items, and a query keeps the keys of its own bucket that lie in its chunk or the one before
// (Reformer's look-one-back). Rounds are unioned. Each query also keeps its last visible key
// (its own token), so no row is empty. One bucket with chunk >= 2N keeps every visible key.
// Work: hashing O(N d buckets rounds), one sort O(N log N) per round, and attention only inside
// the kept lists (at most 2 chunk keys per query and round).
#include <algorithm>
#include <cmath>

#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"
#include "compute/variants/util.h"

namespace attn {

namespace {

class LshPattern final : public Pattern {
 public:
  LshPattern(int buckets, int rounds, int chunk, uint64_t seed)
      : buckets_(buckets), rounds_(rounds), chunk_(chunk), seed_(seed) {}
  VariantInfo info() const override { return kLshPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    // One rotation per round, shared by every head (as Reformer shares it across a layer).
    std::vector<std::vector<float>> rot;
    for (int r = 0; r < rounds_; ++r)
      rot.push_back(detail::lsh_rotation(p.d, buckets_, detail::mix_seed(seed_, uint64_t(r))));
    parallel_for(p.n_heads, [&](int h) {
      std::vector<std::vector<int32_t>> rows(size_t(p.n_q));
      std::vector<int> qb(size_t(p.n_q)), kb(size_t(p.n_k));
      struct Item {
        int bucket;
        int32_t pos;
        int32_t index;  // key j, or -1 - i for query i
      };
      std::vector<Item> items(size_t(p.n_q) + p.n_k);
      for (int r = 0; r < rounds_; ++r) {
        for (int i = 0; i < p.n_q; ++i)
          qb[size_t(i)] = detail::lsh_bucket(p.q_row(h, i), p.d, rot[size_t(r)], buckets_);
        for (int j = 0; j < p.n_k; ++j)
          kb[size_t(j)] = detail::lsh_bucket(p.k_row(h, j), p.d, rot[size_t(r)], buckets_);
        size_t n = 0;
        for (int j = 0; j < p.n_k; ++j) items[n++] = {kb[size_t(j)], p.kpos(j), j};
        for (int i = 0; i < p.n_q; ++i) items[n++] = {qb[size_t(i)], p.qpos(i), -1 - i};
        // Keys before queries at equal bucket and position (a token sees its own key).
        std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
          if (a.bucket != b.bucket) return a.bucket < b.bucket;
          if (a.pos != b.pos) return a.pos < b.pos;
          return a.index > b.index;
        });
        const int64_t total = int64_t(items.size());
        for (int64_t m = 0; m < total; ++m) {
          if (items[size_t(m)].index >= 0) continue;
          const int i = -1 - items[size_t(m)].index;
          const int64_t c = m / chunk_;
          const int64_t lo = std::max<int64_t>(0, (c - 1) * chunk_);
          const int64_t hi = std::min<int64_t>(total, (c + 1) * chunk_);
          std::vector<int32_t>& keep = rows[size_t(i)];
          for (int64_t e = lo; e < hi; ++e) {
            const Item& it = items[size_t(e)];
            if (it.index >= 0 && it.bucket == items[size_t(m)].bucket && p.visible(i, it.index))
              keep.push_back(it.index);
          }
        }
      }
      for (int i = 0; i < p.n_q; ++i) {
        std::vector<int32_t>& keep = rows[size_t(i)];
        const int last = p.causal ? detail::last_visible_key(p, i) : -1;
        if (last >= 0) keep.push_back(last);
        if (!p.causal && keep.empty()) keep.push_back(std::min(p.n_k - 1, std::max(0, p.qpos(i))));
        std::sort(keep.begin(), keep.end());
        keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
      }
      l.indices[size_t(h)] = detail::index_layout_from_rows(rows);
    });
    if (stats) stats->flops += predicted_select_flops(p);
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    // Hashing: a d x buckets/2 product per query and key and round (the sort is not flops).
    const double half = std::max(1, buckets_ / 2);
    return 2.0 * p.d * half * rounds_ * (double(p.n_heads) * p.n_q + double(p.n_heads) * p.n_k);
  }

 private:
  int buckets_, rounds_, chunk_;
  uint64_t seed_;
};

VariantInfo lsh_info() {
  return {"lsh",
          "LSH buckets (Reformer)",
          "dynamic",
          "Kitaev, Kaiser, Levskaya 2020, Reformer: The Efficient Transformer",
          "Angular LSH shared by queries and keys; attention within a bucket, in the query's "
          "sorted chunk and the one before; rounds unioned.",
          {int_param("buckets", 1, 4096, 8, "hash buckets (1 or even)"),
           int_param("rounds", 1, 64, 2, "hash rounds (their kept sets are unioned)"),
           int_param("chunk", 1, 1 << 30, 64, "items per chunk of the sorted sequence"),
           int_param("seed", 0, 1000000000, 0, "random seed of the rotations")}};
}

std::shared_ptr<const Pattern> make_lsh(const Params& params) {
  const int buckets = int(params.at("buckets"));
  if (buckets != 1 && buckets % 2 != 0)
    throw Error(ErrorCode::BadParameter,
                "lsh(buckets=" + std::to_string(buckets) +
                    "): must be 1 or even (angular LSH splits each random direction into two "
                    "buckets)");
  return std::make_shared<LshPattern>(buckets, int(params.at("rounds")), int(params.at("chunk")),
                                      uint64_t(params.at("seed")));
}

}  // namespace

const PatternFactory kLshPattern = {lsh_info, make_lsh};

}  // namespace attn
