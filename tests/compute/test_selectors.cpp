// Dynamic selectors against naive re-implementations of their definitions, budgets, causality,
// and Sketch&Walk's walk across layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "compute/layout.h"
#include "compute/registry.h"
#include "compute/variants/selectors/sketch_walk.h"
#include "test_util.h"

using namespace attn;

namespace {

double qk(const Problem& p, int h, int i, int j) {
  double s = 0;
  for (int t = 0; t < p.d; ++t) s += double(p.q_row(h, i)[t]) * double(p.k_row(h, j)[t]);
  return s;
}

int n_visible(const Problem& p, int i) {
  int n = 0;
  for (int j = 0; j < p.n_k; ++j) n += p.visible(i, j);
  return n;
}

std::vector<int32_t> row_keys(const Layout& l, const Problem& p, int h, int i) {
  std::vector<int32_t> keys;
  layout_row_keys(l, p, h, i, keys);
  return keys;
}

// Problems exercising odd sizes, grouped-query heads, decode-like n_q < n_k, more queries than
// keys (the first queries then see nothing when causal) and both masks.
std::vector<Problem> problems() {
  std::vector<Problem> out;
  uint64_t seed = 1;
  for (bool causal : {true, false})
    for (auto [n_q, n_k] :
         {std::pair{77, 77}, std::pair{1, 1}, std::pair{20, 131}, std::pair{130, 130}})
      out.push_back(random_problem(4, 2, n_q, n_k, 12, causal, seed++, 1.5f));
  return out;
}

// Every kept entry is visible, rows ascending, and the per-head layout count matches.
void expect_well_formed(const Layout& l, const Problem& p, const std::string& spec) {
  for (int h = 0; h < p.n_heads; ++h)
    for (int i = 0; i < p.n_q; ++i) {
      if (l.kind == Layout::Kind::Indices) {
        const IndexLayout& x = l.index(h);
        for (int64_t e = x.row_ptr[i]; e < x.row_ptr[i + 1]; ++e) {
          ASSERT_TRUE(p.visible(i, x.col[e])) << spec << ": invisible key kept";
          if (e > x.row_ptr[i]) {
            ASSERT_LT(x.col[e - 1], x.col[e]) << spec;
          }
        }
      } else if (l.kind == Layout::Kind::Lines) {
        std::vector<int32_t> keys;
        layout_row_keys(l, p, h, i, keys);
        for (size_t e = 0; e < keys.size(); ++e) {
          ASSERT_TRUE(p.visible(i, keys[e])) << spec << ": invisible key kept";
          if (e > 0) {
            ASSERT_LT(keys[e - 1], keys[e]) << spec;
          }
        }
      }
    }
  if (l.kind != Layout::Kind::Blocks) return;
  for (const BlockLayout& b : l.blocks)
    for (int r = 0; r < b.n_qb; ++r)
      for (int32_t e = b.row_ptr[r] + 1; e < b.row_ptr[r + 1]; ++e)
        ASSERT_LT(b.col[e - 1], b.col[e]) << spec;
}

TEST(Selectors, EverySelectorIsWellFormedAndCountsFlops) {
  for (const char* spec : {"block_topk(block=16,k=2)", "topk(k=5)", "top_p(block=16,p=0.8)",
                           "vertical_slash(last_q=8,vertical=4,slash=6)", "h2o(heavy=6,recent=5)",
                           "sketch_walk(block=16,density=0.3,sketch_dim=8,seed=1)"}) {
    Variant v = make_variant(spec);
    ASSERT_TRUE(v.pattern()->dynamic()) << spec;
    for (const Problem& p : problems()) {
      SelectStats st;
      Layout l = v.select(p, &st);
      expect_well_formed(l, p, spec);
      const size_t heads = l.kind == Layout::Kind::Blocks    ? l.blocks.size()
                           : l.kind == Layout::Kind::Indices ? l.indices.size()
                                                             : l.lines.size();
      EXPECT_EQ(int(heads), p.n_heads) << spec;
      EXPECT_GT(st.flops, 0) << spec;
      EXPECT_GE(st.seconds, 0) << spec;
      EXPECT_GT(v.predict(p).flops, 0) << spec;
      for (int h = 0; h < p.n_heads; ++h)
        EXPECT_LE(layout_kept_entries(l, p, h), visible_entries(p)) << spec;
    }
  }
}

TEST(Selectors, TopkKeepsExactlyTheKLargestScores) {
  for (int k : {1, 5, 40}) {
    Variant v = make_variant("topk(k=" + std::to_string(k) + ")");
    for (const Problem& p : problems()) {
      Layout l = v.select(p);
      int64_t kept_total = 0;
      for (int h = 0; h < p.n_heads; ++h)
        for (int i = 0; i < p.n_q; ++i) {
          std::vector<int32_t> keys = row_keys(l, p, h, i);
          int nv = n_visible(p, i);
          ASSERT_EQ(int(keys.size()), std::min(k, nv)) << "row " << i;
          kept_total += int64_t(keys.size());
          std::set<int32_t> kept(keys.begin(), keys.end());
          double worst_kept = INFINITY, best_dropped = -INFINITY;
          for (int j = 0; j < p.n_k; ++j) {
            if (!p.visible(i, j)) continue;
            double s = qk(p, h, i, j);
            if (kept.count(j))
              worst_kept = std::min(worst_kept, s);
            else
              best_dropped = std::max(best_dropped, s);
          }
          // Scores are f32 (as kernels compute them): allow their rounding against f64 here.
          ASSERT_GE(worst_kept, best_dropped - 1e-5 * (1 + std::abs(best_dropped)))
              << "row " << i << " dropped a larger score";
        }
      EXPECT_DOUBLE_EQ(v.pattern()->predicted_density(p),
                       double(kept_total) / double(visible_entries(p) * p.n_heads));
    }
  }
}

// Rows of thousands of keys (the sampled threshold, the vectorised candidate pass, the histogram
// over the candidates' range), an odd length, grouped-query heads: every row keeps exactly
// min(k, visible) keys and no dropped score beats a kept one.
TEST(Selectors, TopkOnLongRowsKeepsTheLargestScores) {
  const Problem p = random_problem(2, 1, 4133, 4133, 16, true, 17, 1.3f);
  for (int k : {7, 333, 2000}) {
    const Layout l = make_variant("topk(k=" + std::to_string(k) + ")").select(p);
    for (int h = 0; h < p.n_heads; ++h)
      for (int i : {0, 6, 1023, 1024, 2047, 2999, 4131, 4132}) {
        const std::vector<int32_t> keys = row_keys(l, p, h, i);
        ASSERT_EQ(int(keys.size()), std::min(k, i + 1)) << "k=" << k << " row " << i;
        ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
        ASSERT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
        const std::set<int32_t> kept(keys.begin(), keys.end());
        double worst_kept = INFINITY, best_dropped = -INFINITY;
        for (int j = 0; j <= i; ++j)
          (kept.count(j) ? worst_kept : best_dropped) =
              kept.count(j) ? std::min(worst_kept, qk(p, h, i, j))
                            : std::max(best_dropped, qk(p, h, i, j));
        ASSERT_GE(worst_kept, best_dropped - 1e-5 * (1 + std::abs(best_dropped)))
            << "k=" << k << " row " << i;
      }
  }
}

// Many exactly equal scores (small integers), rows long enough for the sampled threshold: the
// k kept keys are the larger scores, ties to the lower key index.
TEST(Selectors, TopkBreaksTiesToTheLowerIndex) {
  const int n = 2500;
  Problem p = random_problem(1, 1, n, n, 4, true, 3, 1.0f);
  for (int i = 0; i < n; ++i)
    for (int t = 0; t < p.d; ++t) p.q[size_t(i) * p.d + t] = t == 0 ? 1.0f : 0.0f;
  for (int j = 0; j < n; ++j)
    for (int t = 0; t < p.d; ++t)
      p.k[size_t(j) * p.d + t] = t == 0 ? float((j * 7919) % 5) - 2.0f : 0.5f;
  for (int k : {1, 300, 1200}) {
    Layout l = make_variant("topk(k=" + std::to_string(k) + ")").select(p);
    for (int i : {0, 900, 1500, n - 1}) {
      std::vector<std::pair<float, int>> order;  // (-score, index)
      for (int j = 0; j <= i; ++j) order.push_back({-p.k[size_t(j) * p.d], j});
      std::sort(order.begin(), order.end());
      std::vector<int32_t> want;
      for (int t = 0; t < std::min(k, i + 1); ++t) want.push_back(order[size_t(t)].second);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(row_keys(l, p, 0, i), want) << "k=" << k << " row " << i;
    }
  }
}

// Naive block top-k: pooled means, current block + k best others, ties to the lower index.
std::vector<std::set<int>> naive_block_topk(const Problem& p, int h, int b, int k) {
  int n_qb = (p.n_q + b - 1) / b, n_kb = (p.n_k + b - 1) / b;
  auto mean = [&](bool query, int blk) {
    std::vector<double> m(size_t(p.d), 0.0);
    int lo = blk * b, hi = std::min(lo + b, query ? p.n_q : p.n_k);
    for (int x = lo; x < hi; ++x)
      for (int t = 0; t < p.d; ++t) m[t] += query ? p.q_row(h, x)[t] : p.k_row(h, x)[t];
    for (auto& v : m) v /= (hi - lo);
    return m;
  };
  std::vector<std::set<int>> out(static_cast<size_t>(n_qb));
  for (int r = 0; r < n_qb; ++r) {
    int last_q = std::min((r + 1) * b, p.n_q) - 1;
    int frontier = -1;
    for (int j = 0; j < p.n_k; ++j)
      if (p.kpos(j) <= p.qpos(last_q)) frontier = j;
    if (p.causal && frontier < 0) continue;
    int diag = frontier < 0 ? 0 : frontier / b;
    int nv = p.causal ? diag + 1 : n_kb;
    std::vector<double> qm = mean(true, r);
    std::vector<std::pair<double, int>> cand;
    for (int c = 0; c < nv; ++c) {
      if (c == diag) continue;
      std::vector<double> km = mean(false, c);
      cand.push_back({-std::inner_product(qm.begin(), qm.end(), km.begin(), 0.0), c});
    }
    std::sort(cand.begin(), cand.end());
    out[r].insert(diag);
    for (int t = 0; t < std::min<int>(k, int(cand.size())); ++t) out[r].insert(cand[t].second);
  }
  return out;
}

TEST(Selectors, BlockTopkMatchesNaiveDefinition) {
  for (auto [b, k] : {std::pair{16, 2}, std::pair{7, 3}, std::pair{64, 1}, std::pair{5, 0}}) {
    std::string spec = "block_topk(block=" + std::to_string(b) + ",k=" + std::to_string(k) + ")";
    Variant v = make_variant(spec);
    for (const Problem& p : problems()) {
      Layout l = v.select(p);
      ASSERT_EQ(l.kind, Layout::Kind::Blocks);
      for (int h = 0; h < p.n_heads; ++h) {
        auto want = naive_block_topk(p, h, b, k);
        const BlockLayout& bl = l.block(h);
        ASSERT_EQ(bl.bq, b);
        ASSERT_EQ(bl.n_qb, int(want.size()));
        for (int r = 0; r < bl.n_qb; ++r) {
          std::set<int> got(bl.col.begin() + bl.row_ptr[r], bl.col.begin() + bl.row_ptr[r + 1]);
          ASSERT_EQ(got, want[r]) << spec << " head " << h << " block row " << r;
          ASSERT_LE(int(got.size()), k + 1);
        }
      }
    }
  }
}

TEST(Selectors, TopPKeepsAtLeastPOfTheEstimatedMassAndNoMore) {
  const int b = 16;
  for (double target : {0.3, 0.8, 0.99}) {
    Variant v = make_variant("top_p(block=16,p=" + std::to_string(target) + ")");
    for (const Problem& p : problems()) {
      Layout l = v.select(p);
      double scale = p.effective_scale();
      for (int h = 0; h < p.n_heads; ++h) {
        const BlockLayout& bl = l.block(h);
        for (int r = 0; r < bl.n_qb; ++r) {
          int q0 = r * b, q1 = std::min(q0 + b, p.n_q);
          // Naive estimate: pooled query . pooled key block + log mean visible count, softmaxed.
          std::vector<double> qm(size_t(p.d), 0.0);
          for (int i = q0; i < q1; ++i)
            for (int t = 0; t < p.d; ++t) qm[t] += p.q_row(h, i)[t] / double(q1 - q0);
          std::vector<double> logit;
          for (int c = 0; c * b < p.n_k; ++c) {
            int k0 = c * b, k1 = std::min(k0 + b, p.n_k);
            double count = 0, dot = 0;
            for (int i = q0; i < q1; ++i)
              for (int j = k0; j < k1; ++j) count += p.visible(i, j);
            if (count == 0) break;
            for (int j = k0; j < k1; ++j)
              for (int t = 0; t < p.d; ++t) dot += qm[t] * p.k_row(h, j)[t] / double(k1 - k0);
            logit.push_back(scale * dot + std::log(count / double(q1 - q0)));
          }
          if (logit.empty()) {
            ASSERT_EQ(bl.row_ptr[r + 1], bl.row_ptr[r]);
            continue;
          }
          double mx = *std::max_element(logit.begin(), logit.end()), sum = 0;
          for (double x : logit) sum += std::exp(x - mx);
          double kept = 0, smallest_optional = INFINITY;
          int diag = int(logit.size()) - 1;
          if (!p.causal) {  // current block: that of the last query's position
            diag = 0;
            for (int j = 0; j < p.n_k; ++j)
              if (p.kpos(j) <= p.qpos(q1 - 1)) diag = j / b;
          }
          bool has_diag = false;
          for (int32_t e = bl.row_ptr[r]; e < bl.row_ptr[r + 1]; ++e) {
            double m = std::exp(logit[bl.col[e]] - mx) / sum;
            kept += m;
            if (bl.col[e] == diag)
              has_diag = true;
            else
              smallest_optional = std::min(smallest_optional, m);
          }
          ASSERT_TRUE(has_diag) << "current block dropped, row " << r;
          ASSERT_GE(kept, target - 1e-9) << "row " << r;
          if (smallest_optional < INFINITY) {
            ASSERT_LT(kept - smallest_optional, target + 1e-9) << "row " << r << " keeps too much";
          }
        }
      }
    }
  }
}

// Naive vertical-slash: columns and diagonals from the last queries' exact softmax.
std::vector<std::set<int>> naive_vertical_slash(const Problem& p, int h, int last_q, int nv,
                                                int ns) {
  std::vector<double> col(size_t(p.n_k), 0.0);
  std::map<int64_t, double> diag;
  for (int i = std::max(0, p.n_q - last_q); i < p.n_q; ++i) {
    std::vector<double> s;
    std::vector<int> js;
    for (int j = 0; j < p.n_k; ++j)
      if (p.visible(i, j)) s.push_back(p.effective_scale() * qk(p, h, i, j)), js.push_back(j);
    if (s.empty()) continue;
    double mx = *std::max_element(s.begin(), s.end()), sum = 0;
    for (double x : s) sum += std::exp(x - mx);
    for (size_t t = 0; t < s.size(); ++t) {
      double pr = std::exp(s[t] - mx) / sum;
      col[js[t]] += pr;
      diag[int64_t(p.qpos(i)) - p.kpos(js[t])] += pr;
    }
  }
  std::vector<std::pair<double, int>> cols;
  for (int j = 0; j < p.n_k; ++j) cols.push_back({-col[j], j});
  std::sort(cols.begin(), cols.end());
  std::set<int> vcols;
  for (int t = 0; t < std::min<int>(nv, p.n_k); ++t) vcols.insert(cols[t].second);
  std::vector<std::tuple<double, int64_t, int64_t>> lines;  // (-score, |offset|, -offset)
  for (auto [o, s] : diag)
    if (o != 0 && s > 0) lines.push_back({-s, std::llabs(o), -o});
  std::sort(lines.begin(), lines.end());
  std::set<int64_t> offs = {0};
  for (int t = 0; t < std::min<int>(ns - 1, int(lines.size())); ++t)
    offs.insert(-std::get<2>(lines[t]));
  std::vector<std::set<int>> rows(size_t(p.n_q));
  for (int i = 0; i < p.n_q; ++i)
    for (int j = 0; j < p.n_k; ++j)
      if (p.visible(i, j) && (vcols.count(j) || offs.count(int64_t(p.qpos(i)) - p.kpos(j))))
        rows[i].insert(j);
  return rows;
}

TEST(Selectors, VerticalSlashMatchesNaiveDefinitionAndBudget) {
  for (auto [lq, nv, ns] :
       {std::tuple{8, 4, 6}, std::tuple{1, 0, 1}, std::tuple{64, 10, 3}, std::tuple{100, 10, 5}}) {
    std::string spec = "vertical_slash(last_q=" + std::to_string(lq) +
                       ",vertical=" + std::to_string(nv) + ",slash=" + std::to_string(ns) + ")";
    Variant v = make_variant(spec);
    for (const Problem& p : problems()) {
      Layout l = v.select(p);
      for (int h = 0; h < p.n_heads; ++h) {
        auto want = naive_vertical_slash(p, h, lq, nv, ns);
        for (int i = 0; i < p.n_q; ++i) {
          std::vector<int32_t> keys = row_keys(l, p, h, i);
          ASSERT_EQ(std::set<int>(keys.begin(), keys.end()), want[i]) << spec << " row " << i;
          ASSERT_LE(int(keys.size()), nv + ns) << spec;
        }
      }
    }
  }
}

// Naive H2O simulation with a std::set cache.
std::vector<std::set<int>> naive_h2o(const Problem& p, int h, int heavy, int recent) {
  std::vector<double> acc(size_t(p.n_k), 0.0);
  std::set<int> heavy_set;
  int joined = 0;
  std::vector<std::set<int>> rows(size_t(p.n_q));
  for (int i = 0; i < p.n_q; ++i) {
    int t = -1;
    for (int j = 0; j < p.n_k; ++j)
      if (p.kpos(j) <= p.qpos(i)) t = j;
    if (t < 0) continue;
    for (; joined < t - recent; ++joined) heavy_set.insert(joined);
    while (int(heavy_set.size()) > heavy) {
      int victim = -1;
      for (int j : heavy_set)
        if (victim < 0 || acc[j] <= acc[victim]) victim = j;
      heavy_set.erase(victim);
    }
    std::set<int> cache = heavy_set;
    for (int j = std::max(0, t - recent); j <= t; ++j) cache.insert(j);
    double mx = -INFINITY, sum = 0;
    for (int j : cache) mx = std::max(mx, p.effective_scale() * qk(p, h, i, j));
    for (int j : cache) sum += std::exp(p.effective_scale() * qk(p, h, i, j) - mx);
    for (int j : cache) acc[j] += std::exp(p.effective_scale() * qk(p, h, i, j) - mx) / sum;
    rows[i] = cache;
  }
  return rows;
}

TEST(Selectors, H2oMatchesNaiveSimulationAndBudget) {
  for (auto [heavy, recent] : {std::pair{6, 5}, std::pair{0, 3}, std::pair{10, 0}}) {
    std::string spec =
        "h2o(heavy=" + std::to_string(heavy) + ",recent=" + std::to_string(recent) + ")";
    Variant v = make_variant(spec);
    for (const Problem& p : problems()) {
      Layout l = v.select(p);
      int64_t kept = 0;
      for (int h = 0; h < p.n_heads; ++h) {
        auto want = naive_h2o(p, h, heavy, recent);
        for (int i = 0; i < p.n_q; ++i) {
          std::vector<int32_t> keys = row_keys(l, p, h, i);
          ASSERT_EQ(std::set<int>(keys.begin(), keys.end()), want[i]) << spec << " row " << i;
          ASSERT_LE(int(keys.size()), heavy + recent + 1);
          for (int32_t j : keys) ASSERT_LE(p.kpos(j), p.qpos(i)) << spec << ": future key cached";
          kept += int64_t(keys.size());
        }
      }
      EXPECT_NEAR(v.pattern()->predicted_density(p) * double(visible_entries(p)) * p.n_heads,
                  double(kept), 1e-6)
          << spec;
    }
  }
}

TEST(Selectors, H2oEvictsTheLeastAttendedKey) {
  // One head, keys 0..9; key 2 gets a huge score from every query, so it must survive eviction
  // while the other old keys go.
  Problem p = random_problem(1, 1, 40, 40, 8, true, 9, 0.1f);
  for (int t = 0; t < p.d; ++t) p.k[size_t(2) * p.d + t] = 0;
  for (int i = 0; i < p.n_q; ++i)
    for (int t = 0; t < p.d; ++t) p.q[size_t(i) * p.d + t] = 1.0f;
  for (int t = 0; t < p.d; ++t) p.k[size_t(2) * p.d + t] = 4.0f;
  Layout l = make_variant("h2o(heavy=1,recent=2)").select(p);
  std::vector<int32_t> last = row_keys(l, p, 0, 39);
  EXPECT_EQ(last, (std::vector<int32_t>{2, 37, 38, 39}));
}

TEST(Selectors, SketchWalkDensityNearTarget) {
  int n = test::quick() ? 512 : 1024;
  for (bool causal : {true, false})
    for (double target : {0.1, 0.3, 0.6}) {
      Problem p = random_problem(2, 1, n, n, 32, causal, 4);
      Variant v = make_variant("sketch_walk(block=16,density=" + std::to_string(target) +
                               ",sketch_dim=16,seed=2)");
      Layout l = v.select(p);
      int n_b = n / 16;
      int64_t visible_blocks = causal ? int64_t(n_b) * (n_b + 1) / 2 : int64_t(n_b) * n_b;
      for (int h = 0; h < 2; ++h) {
        double block_density = double(l.block(h).nnz()) / double(visible_blocks);
        EXPECT_NEAR(block_density, target, 0.02 + (causal ? 1.5 / n_b : 0.0))
            << (causal ? "causal" : "bidirectional") << " target " << target;
        double entry_density = double(layout_kept_entries(l, p, h)) / double(visible_entries(p));
        EXPECT_NEAR(entry_density, target, 0.1) << "target " << target;
        const BlockLayout& b = l.block(h);
        for (int r = 0; r < b.n_qb; ++r) {
          EXPECT_EQ(b.col[b.row_ptr[r]], 0) << "first block dropped";
          EXPECT_EQ(b.col[b.row_ptr[r + 1] - 1], causal ? r : b.col[b.row_ptr[r + 1] - 1]);
          if (!causal) {
            bool diag = false;
            for (int32_t e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e) diag = diag || b.col[e] == r;
            EXPECT_TRUE(diag) << "current block dropped";
          }
        }
      }
    }
}

TEST(Selectors, SketchWalkAccumulatesItsWalkAcrossLayers) {
  const int n = 256, b = 16, n_b = n / b;
  Variant v = make_variant("sketch_walk(block=16,density=0.25,sketch_dim=32,seed=5)");
  Problem l1 = random_problem(2, 2, n, n, 32, true, 11, 2.0f);
  Problem l2 = random_problem(2, 2, n, n, 32, true, 12, 2.0f);

  auto seq = v.pattern()->new_sequence_state();
  ASSERT_NE(seq, nullptr);
  auto* walk = dynamic_cast<WalkState*>(seq.get());
  ASSERT_NE(walk, nullptr);
  v.select(l1, nullptr, seq.get());
  EXPECT_EQ(walk->layers, 1);
  std::vector<std::vector<double>> w1 = walk->w;  // = A_1
  Layout two = v.select(l2, nullptr, seq.get());
  EXPECT_EQ(walk->layers, 2);

  // A_2 alone: a fresh walk over layer 2 only.
  auto fresh = v.pattern()->new_sequence_state();
  Layout one = v.select(l2, nullptr, fresh.get());
  const auto& a2 = dynamic_cast<WalkState*>(fresh.get())->w;
  // Without a state the selector behaves as a single layer.
  Layout none = v.select(l2);
  for (int h = 0; h < 2; ++h) EXPECT_EQ(none.block(h).col, one.block(h).col);

  bool differs = false;
  for (int h = 0; h < 2; ++h) {
    // W_2 = rownorm(A_2 W_1), rows stochastic, causal.
    for (int r = 0; r < n_b; ++r) {
      double sum = 0;
      std::vector<double> want(n_b, 0.0);
      for (int m = 0; m < n_b; ++m)
        for (int c = 0; c < n_b; ++c) want[c] += a2[h][r * n_b + m] * w1[h][m * n_b + c];
      for (double x : want) sum += x;
      for (int c = 0; c < n_b; ++c) {
        EXPECT_NEAR(walk->w[h][r * n_b + c], want[c] / sum, 1e-12);
        if (c > r) {
          EXPECT_EQ(walk->w[h][r * n_b + c], 0.0);
        }
      }
    }
    differs = differs || two.block(h).col != one.block(h).col;
  }
  EXPECT_TRUE(differs) << "the walk never changed a selection";

  // A non-square layer restarts the walk.
  Problem decode = random_problem(2, 2, 16, n, 32, true, 13);
  v.select(decode, nullptr, seq.get());
  EXPECT_EQ(walk->layers, 0);
  v.select(l2, nullptr, seq.get());
  EXPECT_EQ(walk->layers, 1);
}

}  // namespace
