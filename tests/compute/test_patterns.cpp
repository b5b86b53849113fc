// Static patterns: analytic block classification against brute force, closed-form densities
// against counted ones, and the selected layouts against the masks entry by entry.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compute/layout.h"
#include "compute/mask.h"
#include "compute/registry.h"
#include "compute/variants/patterns/static_pattern.h"
#include "test_util.h"

using namespace attn;

namespace {

// Static specs covering every pattern with small and default-ish parameters.
const std::vector<std::string> kStaticSpecs = {
    "window(size=1)",
    "window(size=5)",
    "window(size=64)",
    "sinks_window(sinks=0,window=3)",
    "sinks_window(sinks=4,window=9)",
    "sinks_window(sinks=70,window=1)",
    "strided(stride=1)",
    "strided(stride=2)",
    "strided(stride=7)",
    "strided(stride=32)",
    "fixed(block=8,summary=2)",
    "fixed(block=16,summary=0)",
    "fixed(block=5,summary=5)",
    "fixed(block=32,summary=3)",
    "dilated(local=1,base=2)",
    "dilated(local=4,base=2)",
    "dilated(local=9,base=3)",
    "bigbird(block=8,global=1,window=1,random=2,seed=3)",
    "bigbird(block=16,global=0,window=0,random=1,seed=0)",
    "bigbird(block=4,global=2,window=2,random=3,seed=11)",
};

// A brute-force oracle: exact classification of a box by visiting every entry.
BlockClass brute_classify(const Mask& m, int32_t q_lo, int32_t q_hi, int32_t k_lo, int32_t k_hi) {
  bool any = false, all = true;
  for (int32_t q = q_lo; q <= q_hi; ++q)
    for (int32_t k = k_lo; k <= k_hi; ++k) {
      bool kept = m.keep(q, k);
      any = any || kept;
      all = all && kept;
    }
  return any ? (all ? BlockClass::Full : BlockClass::Partial) : BlockClass::Empty;
}

// Kept entries of one problem by brute force over the mask and the causal rule.
int64_t brute_kept(const Mask& m, const Problem& p) {
  int64_t n = 0;
  for (int i = 0; i < p.n_q; ++i)
    for (int j = 0; j < p.n_k; ++j) n += p.visible(i, j) && m.keep(p.qpos(i), p.kpos(j));
  return n;
}

Problem positions_only(int n_q, int n_k, bool causal) {
  Problem p;
  p.n_q = n_q;
  p.n_k = n_k;
  p.d = 4;
  p.causal = causal;
  return p;
}

class KeepEvenKeys : public Mask {
 public:
  bool keep(int32_t, int32_t kp) const override { return kp % 2 == 0; }
};

TEST(Mask, DefaultClassifyIsExact) {
  KeepEvenKeys m;
  EXPECT_EQ(m.classify(0, 9, 4, 4), BlockClass::Full);
  EXPECT_EQ(m.classify(0, 9, 3, 3), BlockClass::Empty);
  EXPECT_EQ(m.classify(0, 9, 3, 4), BlockClass::Partial);
  EXPECT_EQ(m.classify(5, 4, 0, 10), BlockClass::Empty);  // empty box
}

TEST(Patterns, ClassifyAgreesWithBruteForceOnRandomBoxes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pos(-40, 400), len(0, 70);
  for (const std::string& spec : kStaticSpecs) {
    Variant v = make_variant(spec);
    ASSERT_NE(v.pattern(), nullptr) << spec;
    EXPECT_FALSE(v.pattern()->dynamic()) << spec;
    // The pattern's own mask, and the problem-specific one of the layout (they differ for
    // bidirectional BigBird).
    std::vector<std::shared_ptr<const Mask>> masks;
    masks.push_back(v.pattern()->mask());
    Problem bidir = positions_only(300, 300, false);
    std::shared_ptr<const Mask> lm = v.select(bidir).mask;
    if (lm) masks.push_back(lm);
    for (const auto& m : masks) {
      ASSERT_NE(m, nullptr) << spec;
      int mixed = 0, full = 0;
      for (int t = 0; t < 1500; ++t) {
        int32_t q_lo = pos(rng), k_lo = pos(rng);
        int32_t q_hi = q_lo + len(rng), k_hi = k_lo + len(rng);
        if (t % 3 == 0) k_lo = q_lo - len(rng) / 2, k_hi = k_lo + len(rng);  // near the diagonal
        BlockClass want = brute_classify(*m, q_lo, q_hi, k_lo, k_hi);
        ASSERT_EQ(int(m->classify(q_lo, q_hi, k_lo, k_hi)), int(want))
            << spec << " box q[" << q_lo << "," << q_hi << "] k[" << k_lo << "," << k_hi << "]";
        mixed += want == BlockClass::Partial;
        full += want == BlockClass::Full;
      }
      // Boxes hit partial blocks, unless the parameters keep everything (stride 1, all summary).
      if (full < 1500) {
        EXPECT_GT(mixed, 0) << spec << ": random boxes never hit a partial block";
      }
    }
  }
}

// A static pattern's masks: its own, and the one its selection over a bidirectional problem
// carries (where it has one).
std::vector<std::shared_ptr<const Mask>> masks_of(const std::string& spec) {
  const Variant v = make_variant(spec);
  std::vector<std::shared_ptr<const Mask>> masks = {v.pattern()->mask()};
  if (auto lm = v.select(positions_only(300, 300, false)).mask) masks.push_back(lm);
  return masks;
}

// A score tile's column drops exactly the entries keep() refuses, for every static pattern's
// mask (offset masks by runs, the others entry by entry), at random positions and lengths.
TEST(Patterns, DropColumnAgreesWithKeep) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pos(-40, 400), len(0, 90);
  for (const std::string& spec : kStaticSpecs) {
    for (const auto& m : masks_of(spec))
      for (int t = 0; t < 800; ++t) {
        const int32_t qp0 = pos(rng), kp = t % 2 ? qp0 - len(rng) : pos(rng);
        const int n = len(rng);
        std::vector<float> s(size_t(n) + 1, 1.0f);
        m->drop_column(qp0, kp, n, s.data());
        for (int i = 0; i < n; ++i)
          ASSERT_EQ(std::isinf(s[size_t(i)]), !m->keep(qp0 + i, kp))
              << spec << " qp " << qp0 + i << " kp " << kp;
        ASSERT_EQ(s[size_t(n)], 1.0f) << spec << ": wrote past the column";
      }
  }
}

// A query's run of keys keeps exactly the keys keep() accepts, ascending, for every static
// pattern's mask (offset masks by runs of offsets, the others entry by entry).
TEST(Patterns, AppendKeptAgreesWithKeep) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> pos(-40, 400), len(0, 300);
  for (const std::string& spec : kStaticSpecs) {
    for (const auto& m : masks_of(spec))
      for (int t = 0; t < 800; ++t) {
        const int32_t qp = pos(rng), kp0 = t % 2 ? qp - len(rng) : pos(rng);
        const int n = len(rng), j0 = 1000 + t;
        std::vector<int32_t> got = {-7}, want = {-7};  // appended after what is there
        m->append_kept(qp, kp0, n, j0, got);
        for (int i = 0; i < n; ++i)
          if (m->keep(qp, kp0 + i)) want.push_back(j0 + i);
        ASSERT_EQ(got, want) << spec << " qp " << qp << " kp0 " << kp0 << " n " << n;
      }
  }
}

TEST(Patterns, ClosedFormDensityEqualsCountedDensity) {
  std::vector<int> ns = {1, 2, 7, 64, 77, 129, 300};
  for (const std::string& spec : kStaticSpecs) {
    Variant v = make_variant(spec);
    for (bool causal : {true, false})
      for (int n : ns)
        for (int n_q : {n, (n + 2) / 3}) {
          Problem p = positions_only(n_q, n, causal);
          Layout l = v.select(p);
          ASSERT_TRUE(l.mask || l.kind == Layout::Kind::Indices) << spec;
          int64_t kept = brute_kept(l.mask ? *l.mask : *v.pattern()->mask(), p);
          int64_t visible = visible_entries(p);
          double want = visible ? double(kept) / double(visible) : 1.0;
          EXPECT_DOUBLE_EQ(v.pattern()->predicted_density(p), want)
              << spec << (causal ? " causal" : " bidirectional") << " n_q=" << n_q << " n_k=" << n;
          EXPECT_EQ(layout_kept_entries(l, p, 0), kept) << spec << " n=" << n;
        }
  }
}

// The executed layout keeps exactly the mask's entries (Blocks with partial masks, or Indices).
TEST(Patterns, LayoutsKeepExactlyTheMaskEntries) {
  for (const std::string& spec : kStaticSpecs)
    for (bool causal : {true, false})
      for (auto [n_q, n_k] : {std::pair{97, 97}, std::pair{33, 150}, std::pair{150, 150}}) {
        Variant v = make_variant(spec);
        Problem p = positions_only(n_q, n_k, causal);
        Layout l = v.select(p);
        std::shared_ptr<const Mask> m = l.mask ? l.mask : v.pattern()->mask();
        for (int i = 0; i < n_q; ++i)
          for (int j = 0; j < n_k; ++j)
            ASSERT_EQ(layout_keeps(l, p, 0, i, j), p.visible(i, j) && m->keep(p.qpos(i), p.kpos(j)))
                << spec << " entry (" << i << ", " << j << ")";
        if (l.kind == Layout::Kind::Blocks) {
          const BlockLayout& b = l.block(0);
          for (int r = 0; r < b.n_qb; ++r)
            for (int32_t e = b.row_ptr[r] + 1; e < b.row_ptr[r + 1]; ++e)
              ASSERT_LT(b.col[e - 1], b.col[e]) << spec << ": block row not ascending";
        }
      }
}

TEST(Patterns, ExplicitPositionsAreExactAndPredictCounts) {
  std::mt19937 rng(3);
  for (const std::string& spec : kStaticSpecs) {
    Variant v = make_variant(spec);
    Problem p = random_problem(2, 1, 40, 90, 8, true, 5);
    int32_t x = 3;
    for (int j = 0; j < p.n_k; ++j) p.k_pos.push_back(x += 1 + int(rng() % 3));
    for (int i = 0; i < p.n_q; ++i) p.q_pos.push_back(p.k_pos[50 + i]);
    EXPECT_LT(v.pattern()->predicted_density(p), 0) << spec;
    Layout l = v.select(p);
    std::shared_ptr<const Mask> m = l.mask ? l.mask : v.pattern()->mask();
    int64_t kept = 0;
    for (int i = 0; i < p.n_q; ++i)
      for (int j = 0; j < p.n_k; ++j) {
        bool want = p.visible(i, j) && m->keep(p.qpos(i), p.kpos(j));
        kept += want;
        ASSERT_EQ(layout_keeps(l, p, 0, i, j), want) << spec << " (" << i << ", " << j << ")";
      }
    Cost c = v.predict(p);
    EXPECT_DOUBLE_EQ(c.flops, 4.0 * p.d * double(kept) * p.n_heads) << spec;
  }
}

TEST(Patterns, DiagonalPatternsSwitchToIndicesWhenBlocksWaste) {
  Problem p = positions_only(1000, 1000, true);
  EXPECT_EQ(make_variant("strided(stride=16)").select(p).kind, Layout::Kind::Indices);
  EXPECT_EQ(make_variant("strided(stride=2)").select(p).kind, Layout::Kind::Blocks);
  EXPECT_EQ(make_variant("dilated(local=4,base=2)").select(p).kind, Layout::Kind::Indices);
  EXPECT_EQ(make_variant("fixed(block=128,summary=8)").select(p).kind, Layout::Kind::Indices);
  EXPECT_EQ(make_variant("window(size=100)").select(p).kind, Layout::Kind::Blocks);
  // The index layouts (built by jumping between kept offsets / columns) are exact.
  for (bool causal : {true, false}) {
    Problem q = positions_only(700, 1000, causal);
    for (const char* spec :
         {"strided(stride=16)", "dilated(local=4,base=3)", "fixed(block=128,summary=8)"}) {
      Variant v = make_variant(spec);
      Layout l = v.select(q);
      ASSERT_EQ(l.kind, Layout::Kind::Indices) << spec;
      std::vector<int32_t> keys;
      for (int i = 0; i < q.n_q; ++i) {
        layout_row_keys(l, q, 0, i, keys);
        std::vector<int32_t> want;
        for (int j = 0; j < q.n_k; ++j)
          if (q.visible(i, j) && v.pattern()->mask()->keep(q.qpos(i), q.kpos(j))) want.push_back(j);
        ASSERT_EQ(keys, want) << spec << " row " << i;
      }
    }
  }
  // Window blocks skip the far past: only the diagonal band of blocks is kept.
  Layout w = make_variant("window(size=64)").select(p);
  EXPECT_LE(w.block(0).nnz(), 2 * w.block(0).n_qb);
}

TEST(Patterns, ExpectedDensitiesForKnownCases) {
  Problem p = positions_only(1024, 1024, true);
  // Causal window of 64 over 1024 tokens: rows keep min(i + 1, 64).
  double kept = 0;
  for (int i = 0; i < 1024; ++i) kept += std::min(i + 1, 64);
  EXPECT_DOUBLE_EQ(make_variant("window(size=64)").pattern()->predicted_density(p),
                   kept / (1024.0 * 1025.0 / 2.0));
  // Bidirectional window keeps 2 x size - 1 keys in the interior.
  Problem b = positions_only(1, 1024, false);
  b.q_pos = {500};
  b.k_pos.resize(1024);
  for (int j = 0; j < 1024; ++j) b.k_pos[j] = j;
  EXPECT_EQ(layout_kept_entries(make_variant("window(size=10)").select(b), b, 0), 19);
}

TEST(Patterns, BigBirdRandomBlocksAreSeededAndCounted) {
  Problem p = positions_only(1024, 1024, true);
  auto blocks = [&](const std::string& spec) { return make_variant(spec).select(p).block(0); };
  BlockLayout a = blocks("bigbird(block=64,global=1,window=1,random=3,seed=1)");
  BlockLayout a2 = blocks("bigbird(block=64,global=1,window=1,random=3,seed=1)");
  BlockLayout c = blocks("bigbird(block=64,global=1,window=1,random=3,seed=2)");
  EXPECT_EQ(a.col, a2.col);
  EXPECT_NE(a.col, c.col);
  // Row r (aligned blocks): global block 0, blocks r-1 and r, and min(3, r - 2) random past ones.
  ASSERT_EQ(a.n_qb, 16);
  for (int r = 0; r < 16; ++r) {
    int want = r == 0 ? 1 : r == 1 ? 2 : 3 + std::min(3, r - 2);
    EXPECT_EQ(a.row_ptr[r + 1] - a.row_ptr[r], want) << "row " << r;
    for (int32_t e = a.row_ptr[r]; e < a.row_ptr[r + 1]; ++e) EXPECT_EQ(a.full[e], 1);
  }
  // The global block row attends to everything when bidirectional.
  Problem b = positions_only(256, 256, false);
  BlockLayout g =
      make_variant("bigbird(block=64,global=1,window=0,random=0,seed=0)").select(b).block(0);
  EXPECT_EQ(g.row_ptr[1] - g.row_ptr[0], 4);
  EXPECT_EQ(g.row_ptr[2] - g.row_ptr[1], 2);  // global column + itself
}

}  // namespace
