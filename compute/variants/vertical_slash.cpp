// Vertical-slash selection of MInference (Jiang et al. 2024): the exact attention of the last
// `last_q` queries is computed; summing it per key gives vertical (column) scores and summing it
// per offset qp - kp gives slash (diagonal) scores. Every query then keeps the `vertical` best
// columns and the keys on the `slash` best diagonals, each restricted to its visible keys, so a
// row holds at most vertical + slash keys. The main diagonal (offset 0) is always one of the
// slash lines, so every query whose own position is a key keeps at least that key.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "compute/variants/patterns.h"
#include "compute/variants/selector_util.h"

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
    double flops = 0;
    Layout l;
    l.kind = Layout::Kind::Indices;
    for (int h = 0; h < p.n_heads; ++h) l.indices.push_back(select_head(p, h, &flops));
    if (stats) stats->flops += flops;
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
  IndexLayout select_head(const Problem& p, int h, double* flops) const {
    double scale = p.effective_scale();
    std::vector<double> vertical(size_t(p.n_k), 0.0);
    OffsetSums slash(p);  // offset qp - kp -> summed probability
    std::vector<double> row;
    for (int i = std::max(0, p.n_q - last_q_); i < p.n_q; ++i) {
      int nv = p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
      if (nv == 0) continue;
      row.resize(size_t(nv));
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < nv; ++j) {
        row[j] = scale * detail::dot(p.q_row(h, i), p.k_row(h, j), p.d);
        mx = std::max(mx, row[j]);
      }
      for (auto& x : row) sum += (x = std::exp(x - mx));
      for (int j = 0; j < nv; ++j) {
        double pr = row[j] / sum;
        vertical[j] += pr;
        slash.add(int64_t(p.qpos(i)) - p.kpos(j), pr);
      }
      *flops += double(nv) * (2.0 * p.d + 5.0);  // dot, scale, max, exp, sum, divide
    }

    // Best columns and best offsets, ties to the lower key index / smaller |offset|.
    std::vector<int32_t> cols(size_t(p.n_k));
    for (int j = 0; j < p.n_k; ++j) cols[j] = j;
    int nc = std::min<int>(vertical_, p.n_k);
    std::partial_sort(cols.begin(), cols.begin() + nc, cols.end(), [&](int a, int b) {
      return vertical[a] != vertical[b] ? vertical[a] > vertical[b] : a < b;
    });
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
    std::vector<int64_t> lines = {0};
    for (int t = 0; t < no; ++t) lines.push_back(offs[t].first);

    // Per query: visible columns plus the visible keys on the chosen diagonals.
    std::vector<std::vector<int32_t>> rows(size_t(p.n_q));
    for (int i = 0; i < p.n_q; ++i) {
      int nv = p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k;
      auto& keys = rows[i];
      for (int32_t j : cols)
        if (j < nv) keys.push_back(j);
      for (int64_t o : lines) {
        int j = key_at(p, int64_t(p.qpos(i)) - o);
        if (j >= 0 && j < nv) keys.push_back(j);
      }
      std::sort(keys.begin(), keys.end());
      keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    }
    return detail::index_layout_from_rows(rows);
  }

  // Index of the key at position kp, or -1.
  static int key_at(const Problem& p, int64_t kp) {
    if (p.k_pos.empty()) return kp >= 0 && kp < p.n_k ? int(kp) : -1;
    auto it = std::lower_bound(p.k_pos.begin(), p.k_pos.end(), kp);
    return it != p.k_pos.end() && *it == kp ? int(it - p.k_pos.begin()) : -1;
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
