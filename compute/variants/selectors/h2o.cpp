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

#include "compute/cpu/huge_pages.h"
#include "compute/cpu/simd.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

class H2oPattern final : public Pattern {
 public:
  explicit H2oPattern(const Params& params)
      : heavy_(int(params.at("heavy"))), recent_(int(params.at("recent"))) {}
  VariantInfo info() const override { return kH2oPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    // Row sizes are known ahead (row_budget), so every head writes its CSR in place.
    std::vector<int64_t> row_ptr(size_t(p.n_q) + 1, 0);
    for (int i = 0; i < p.n_q; ++i) row_ptr[size_t(i) + 1] = row_ptr[size_t(i)] + row_budget(p, i);
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices.resize(size_t(p.n_heads));
    std::vector<double> flops(size_t(p.n_heads), 0.0);
    // Heads are independent simulations.
    parallel_for(p.n_heads, [&](int h) {
      l.indices[size_t(h)] = select_head(p, h, row_ptr, &flops[size_t(h)]);
    });
    if (stats)
      for (double f : flops) stats->flops += f;
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

  // Evicts from `heavy` (ascending keys, with their tile columns in `col`) until it holds
  // heavy_ keys: the lowest accumulated attention goes first, ties the newer key. Scores do not
  // change between evictions, so several at once are the `excess` smallest in that order.
  void evict(const std::vector<double>& acc, std::vector<int32_t>& heavy, std::vector<int32_t>& col,
             std::vector<int32_t>& order) const {
    const size_t excess = heavy.size() > size_t(heavy_) ? heavy.size() - size_t(heavy_) : 0;
    if (excess == 0) return;
    if (excess == 1) {
      size_t worst = 0;
      for (size_t e = 1; e < heavy.size(); ++e)
        if (acc[heavy[e]] <= acc[heavy[worst]]) worst = e;  // ties: the later (newer) key
      heavy.erase(heavy.begin() + std::ptrdiff_t(worst));
      col.erase(col.begin() + std::ptrdiff_t(worst));
      return;
    }
    order.resize(heavy.size());
    for (size_t e = 0; e < heavy.size(); ++e) order[e] = int32_t(e);
    auto first_out = [&](int32_t a, int32_t b) {
      const double x = acc[heavy[a]], y = acc[heavy[b]];
      return x != y ? x < y : a > b;
    };
    std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(excess - 1), order.end(),
                     first_out);
    for (size_t e = 0; e < excess; ++e) heavy[size_t(order[e])] = -1;
    size_t w = 0;
    for (size_t e = 0; e < heavy.size(); ++e)
      if (heavy[e] >= 0) {
        heavy[w] = heavy[e];
        col[w++] = col[e];
      }
    heavy.resize(w);
    col.resize(w);
  }

  // One head's simulation, kBlock queries at a time. A block's queries can only attend to the
  // heavy set as it stood when the block began or to keys from the first query's window on
  // (keys that join H later come from there), so one f32 GEMM against those candidates gives
  // every score the block needs; the per-query loop then only picks, exponentiates and
  // accumulates (f64 accumulators).
  IndexLayout select_head(const Problem& p, int h, const std::vector<int64_t>& row_ptr,
                          double* flops) const {
    namespace simd = cpu::ATTN_CPU_NS;
    constexpr int kBlock = 64;
    const float scale2 = float(p.effective_scale() * 1.4426950408889634);  // base-2 exponent
    IndexLayout x;
    x.row_ptr = row_ptr;
    // Rows are appended in order from `row` (no zero fill first: on a VM that pass over the
    // heads' ~100 MB of lists cost as much as the simulation itself).
    x.col.reserve(size_t(row_ptr.back()));
    cpu::advise_huge_pages(x.col.data(), size_t(row_ptr.back()) * sizeof(int32_t));
    std::vector<int32_t> row(size_t(heavy_) + size_t(recent_) + 1);
    std::vector<double> acc(size_t(p.n_k), 0.0);
    std::vector<int32_t> heavy;  // keys older than the window still cached, ascending
    std::vector<int32_t> col;    // col[e]: heavy[e]'s column in the block's score tile
    std::vector<int32_t> order;
    int32_t next_old = 0;  // keys below this have left the window already
    std::vector<float> tile, s;
    for (int i0 = 0; i0 < p.n_q; i0 += kBlock) {
      const int i1 = std::min(i0 + kBlock, p.n_q);
      const int t_last = detail::last_visible_key(p, i1 - 1);
      if (t_last < 0) continue;
      int ib = i0;  // first query of the block that sees a key
      while (detail::last_visible_key(p, ib) < 0) ++ib;
      // Row ib's joins and evictions, then the candidates: H as it stands and [lo, t_last].
      const int lo = std::max(0, detail::last_visible_key(p, ib) - recent_);
      for (; next_old < lo; ++next_old) {
        heavy.push_back(next_old);
        col.push_back(0);
      }
      evict(acc, heavy, col, order);
      const int h0 = int(heavy.size()), nc = h0 + (t_last - lo + 1), m = i1 - ib;
      for (int e = 0; e < h0; ++e) col[size_t(e)] = e;
      tile.resize(size_t(m) * size_t(nc) + simd::kVW);
      s.resize(std::min<size_t>(size_t(heavy_) + size_t(recent_) + 1, size_t(p.n_k) + 1) +
               simd::kVW);
      if (h0 > 0) {
        std::vector<float>& kc = s;  // the heavy keys' rows, packed (s is free until the rows)
        kc.resize(std::max(s.size(), size_t(h0) * size_t(p.d)));
        for (int e = 0; e < h0; ++e)
          std::copy_n(p.k_row(h, heavy[size_t(e)]), p.d, kc.data() + size_t(e) * size_t(p.d));
        detail::gemm_abt(p.q_row(h, ib), p.d, kc.data(), p.d, tile.data(), nc, m, h0, p.d);
      }
      detail::gemm_abt(p.q_row(h, ib), p.d, p.k_row(h, lo), p.d, tile.data() + h0, nc, m, nc - h0,
                       p.d);

      for (int i = ib; i < i1; ++i) {
        const int t = detail::last_visible_key(p, i);
        const int window_lo = std::max(0, t - recent_);
        if (i > ib) {
          for (; next_old < window_lo; ++next_old) {
            heavy.push_back(next_old);
            col.push_back(h0 + (next_old - lo));
          }
          evict(acc, heavy, col, order);
        }
        const float* srow = tile.data() + size_t(i - ib) * size_t(nc);
        const int nh = int(heavy.size()), n = nh + (t - window_lo + 1);
        for (int e = 0; e < nh; ++e) s[size_t(e)] = srow[col[size_t(e)]] * scale2;
        for (int j = window_lo; j <= t; ++j)
          s[size_t(nh + j - window_lo)] = srow[h0 + j - lo] * scale2;
        const int np = (n + simd::kVW - 1) / simd::kVW * simd::kVW;
        for (int e = n; e < np; ++e) s[size_t(e)] = simd::kNegInf;
        // Vector max: a scalar std::max chain is one dependent instruction per key.
        simd::vf mv = simd::splat(simd::kNegInf);
        for (int e = 0; e < np; e += simd::kVW) mv = simd::vmax(mv, simd::loadu(s.data() + e));
        const float mx = simd::hmax(mv);
        simd::vf sum = simd::vf{};
        for (int e = 0; e < np; e += simd::kVW) {
          const simd::vf pr = simd::exp2v(simd::loadu(s.data() + e) - simd::splat(mx));
          simd::storeu(s.data() + e, pr);
          sum += pr;
        }
        const double inv = 1.0 / double(simd::hsum(sum));
        int32_t* out = row.data();
        for (int e = 0; e < nh; ++e) {
          acc[size_t(heavy[size_t(e)])] += double(s[size_t(e)]) * inv;
          out[e] = heavy[size_t(e)];
        }
        for (int j = window_lo; j <= t; ++j) {
          acc[size_t(j)] += double(s[size_t(nh + j - window_lo)]) * inv;
          out[nh + j - window_lo] = j;
        }
        x.col.insert(x.col.end(), out, out + n);
        *flops += double(n) * (2.0 * p.d + 5.0);
      }
    }
    return x;
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

}  // namespace

const PatternFactory kH2oPattern = {h2o_info, make_from_params<Pattern, H2oPattern>};

}  // namespace attn
