// Vertical-slash selection of MInference (Jiang et al. 2024): the exact attention of the last
// `last_q` queries is computed; summing it per key gives vertical (column) scores and summing it
// per offset qp - kp gives slash (diagonal) scores. Every query then keeps the `vertical` best
// columns and the keys on the `slash` best diagonals, each restricted to its visible keys, so a
// row holds at most vertical + slash keys. The main diagonal (offset 0) is always one of the
// slash lines, so every query whose own position is a key keeps at least that key. The result is
// a line layout (the columns and offsets once per head), not per-query key lists.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <unordered_map>

#include "compute/cpu/huge_pages.h"
#include "compute/cpu/simd.h"
#include "compute/parallel.h"
#include "compute/variants/patterns.h"
#include "compute/variants/selectors/selector_util.h"

namespace attn {

namespace {

// Sums per diagonal offset: a dense array over the offset range when it is compact (default
// positions), a hash map otherwise.
class OffsetSums {
 public:
  explicit OffsetSums(const Problem& p) {
    lo_ = int64_t(p.qpos(0)) - p.kpos(p.n_k - 1);
    int64_t n = int64_t(p.qpos(p.n_q - 1)) - p.kpos(0) - lo_ + 1;
    if (n <= 4 * (int64_t(p.n_q) + p.n_k)) dense_.assign(size_t(n), 0.0);
  }
  void add(int64_t o, double x) {
    if (!dense_.empty())
      dense_[size_t(o - lo_)] += x;
    else
      sparse_[o] += x;
  }
  // With the dense array: the sum for offset o is at base()[o] (o within the offset range).
  double* base() { return dense_.empty() ? nullptr : dense_.data() - lo_; }
  std::vector<std::pair<int64_t, double>> nonzero() const {
    std::vector<std::pair<int64_t, double>> out;
    for (size_t t = 0; t < dense_.size(); ++t)
      if (dense_[t] > 0) out.push_back({lo_ + int64_t(t), dense_[t]});
    for (const auto& [o, s] : sparse_)
      if (s > 0) out.push_back({o, s});
    return out;
  }

 private:
  int64_t lo_ = 0;
  std::vector<double> dense_;
  std::unordered_map<int64_t, double> sparse_;
};

class VerticalSlashPattern final : public Pattern {
 public:
  VerticalSlashPattern(int last_q, int vertical, int slash)
      : last_q_(last_q), vertical_(vertical), slash_(slash) {}
  VariantInfo info() const override { return kVerticalSlashPattern.info(); }
  bool dynamic() const override { return true; }

  Layout select(const Problem& p, SelectStats* stats, SequenceState*) const override {
    Layout l;
    l.kind = Layout::Kind::Lines;
    l.lines.resize(size_t(p.n_heads));
    std::vector<double> flops(size_t(p.n_heads), 0.0);
    // Heads in parallel; each worker keeps its score tile for every head it takes.
    const int workers = std::max(1, std::min(thread_count(), p.n_heads));
    std::atomic<int> next{0};
    parallel_for(
        workers,
        [&](int) {
          Scratch sc;
          for (int h = next++; h < p.n_heads; h = next++)
            l.lines[size_t(h)] = select_head(p, h, sc, &flops[size_t(h)]);
        },
        workers);
    if (stats)
      for (double f : flops) stats->flops += f;
    return l;
  }

  double predicted_select_flops(const Problem& p) const override {
    int lq = std::min(last_q_, p.n_q);
    double entries = 0;
    for (int i = p.n_q - lq; i < p.n_q; ++i)
      entries += p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
    return double(p.n_heads) * entries * (2.0 * p.d + 5.0);
  }

 private:
  struct Scratch {
    std::vector<float> tile;  // f32 [64, visible keys]: scores of up to 64 of the last queries
  };

  LineLayout select_head(const Problem& p, int h, Scratch& sc, double* flops) const {
    namespace simd = cpu::ATTN_CPU_NS;
    const float scale2 = float(p.effective_scale() * 1.4426950408889634);  // base-2 exponent
    std::vector<double> vertical(size_t(p.n_k), 0.0);
    OffsetSums slash(p);  // offset qp - kp -> summed probability
    // The last queries' scores by one f32 GEMM, then each row's softmax (f64 sums per key and
    // per offset).
    // Tiles of kTile queries: the tile is kTile x n_k whatever last_q is.
    constexpr int kTile = 64;
    const int iq0 = std::max(0, p.n_q - last_q_);
    const int nv_max = p.causal ? detail::last_visible_key(p, p.n_q - 1) + 1 : p.n_k;
    const int ld = (nv_max + simd::kVW - 1) / simd::kVW * simd::kVW;
    if (sc.tile.size() < size_t(kTile) * size_t(ld)) cpu::resize_huge(sc.tile, size_t(kTile) * ld);
    for (int i = iq0; i < p.n_q; ++i) {
      const int t0 = iq0 + (i - iq0) / kTile * kTile;
      if (i == t0) {
        const int t1 = std::min(t0 + kTile, p.n_q);
        const int nvt = p.causal ? detail::last_visible_key(p, t1 - 1) + 1 : p.n_k;
        detail::gemm_abt(p.q_row(h, t0), p.d, p.k_row(h, 0), p.d, sc.tile.data(), ld, t1 - t0, nvt,
                         p.d);
      }
      const int nv = p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
      if (nv == 0) continue;
      float* row = sc.tile.data() + size_t(i - t0) * size_t(ld);
      const int np = (nv + simd::kVW - 1) / simd::kVW * simd::kVW;
      simd::vf mv = simd::splat(simd::kNegInf);
      for (int j = 0; j < nv; ++j) row[j] *= scale2;
      for (int j = nv; j < np; ++j) row[j] = simd::kNegInf;
      for (int j = 0; j < np; j += simd::kVW) mv = simd::vmax(mv, simd::loadu(row + j));
      const simd::vf m = simd::splat(simd::hmax(mv));
      simd::vf sum = simd::vf{};
      for (int j = 0; j < np; j += simd::kVW) {
        const simd::vf e = simd::exp2v(simd::loadu(row + j) - m);
        simd::storeu(row + j, e);
        sum += e;
      }
      const double inv = 1.0 / double(simd::hsum(sum));
      const int64_t qp = p.qpos(i);
      if (double* sb = slash.base(); sb && p.k_pos.empty()) {
        // Key j lies on offset qp - j: both sums run over consecutive entries (vectorised).
        double* sl = sb + qp;
        double* vt = vertical.data();
        for (int j = 0; j < nv; ++j) {
          const double pr = double(row[j]) * inv;
          vt[j] += pr;
          sl[-j] += pr;
        }
      } else {
        for (int j = 0; j < nv; ++j) {
          const double pr = double(row[j]) * inv;
          vertical[size_t(j)] += pr;
          slash.add(qp - p.kpos(j), pr);
        }
      }
      *flops += double(nv) * (2.0 * p.d + 5.0);  // dot, scale, max, exp, sum, divide
    }

    // Best columns and best offsets, ties to the lower key index / smaller |offset|.
    std::vector<int32_t> cols(size_t(p.n_k));
    for (int j = 0; j < p.n_k; ++j) cols[j] = j;
    int nc = std::min<int>(vertical_, p.n_k);
    auto better_col = [&](int a, int b) {
      return vertical[a] != vertical[b] ? vertical[a] > vertical[b] : a < b;
    };
    if (nc > 0 && nc < p.n_k)
      std::nth_element(cols.begin(), cols.begin() + (nc - 1), cols.end(), better_col);
    cols.resize(size_t(nc));
    std::sort(cols.begin(), cols.end());

    std::vector<std::pair<int64_t, double>> offs = slash.nonzero();
    std::erase_if(offs, [](const auto& x) { return x.first == 0; });
    int no = std::min<int>(slash_ - 1, int(offs.size()));
    std::partial_sort(offs.begin(), offs.begin() + no, offs.end(),
                      [](const auto& a, const auto& b) {
                        if (a.second != b.second) return a.second > b.second;
                        if (std::llabs(a.first) != std::llabs(b.first))
                          return std::llabs(a.first) < std::llabs(b.first);
                        return a.first > b.first;
                      });
    // Offsets descending: a row's keys on them ascend (key positions increase).
    std::vector<int64_t> lines = {0};
    for (int t = 0; t < no; ++t) lines.push_back(offs[t].first);
    std::sort(lines.begin(), lines.end(), std::greater<int64_t>());

    // Every query keeps the same columns and diagonals: the layout stores them once.
    LineLayout x;
    x.columns = std::move(cols);
    x.offsets = std::move(lines);
    return x;
  }

  int last_q_, vertical_, slash_;
};

VariantInfo vertical_slash_info() {
  return {"vertical_slash",
          "Vertical-slash (MInference)",
          "dynamic",
          "Jiang et al. 2024, MInference 1.0: Accelerating Pre-filling for Long-Context LLMs via "
          "Dynamic Sparse Attention",
          "The last queries' exact attention picks the best key columns and diagonals; every query "
          "keeps those.",
          {int_param("last_q", 1, 4096, 64, "queries (from the end) whose attention is estimated"),
           int_param("vertical", 0, 1000000, 128, "key columns kept"),
           int_param("slash", 1, 1000000, 128, "diagonals kept, the main one included")}};
}

std::shared_ptr<const Pattern> make_vertical_slash(const Params& params) {
  return std::make_shared<VerticalSlashPattern>(
      int(params.at("last_q")), int(params.at("vertical")), int(params.at("slash")));
}

}  // namespace

const PatternFactory kVerticalSlashPattern = {vertical_slash_info, make_vertical_slash};

}  // namespace attn
