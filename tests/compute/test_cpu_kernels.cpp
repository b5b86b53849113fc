// The cpu backend against a straightforward double-precision oracle written here: dense,
// block-sparse and index-sparse layouts, every score modifier and normaliser, selective
// attention, GQA, explicit positions and odd sizes; plus cancellation, bad layouts and the
// guarantee that dropped entries contribute nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/kernel_set.h"
#include "compute/error.h"
#include "compute/layout.h"
#include "compute/mask.h"
#include "compute/problem.h"

using namespace attn;
using cpu::KernelSpec;

namespace {

bool quick() {
  return std::getenv("ATTN_TEST_QUICK") != nullptr;
}

// ---- the oracle -------------------------------------------------------------------------------

using KeepFn = std::function<bool(int h, int i, int j)>;  // kept set, causal rule excluded

double apply_mods_ref(const std::vector<ScoreMod>& mods, double s, int h, int H, int qp, int kp) {
  for (const ScoreMod& m : mods) {
    switch (m.kind) {
      case ScoreMod::Kind::Temperature:
        s = s / m.a;
        break;
      case ScoreMod::Kind::Alibi:
        s -= std::pow(2.0, -double(m.a) * (h + 1) / H) * (qp - kp);
        break;
      case ScoreMod::Kind::Softcap:
        s = m.a * std::tanh(s / m.a);
        break;
    }
  }
  return s;
}

// tau with sum_j [z_j - tau]_+^2 = 1, by bisection (independent of the kernel's method).
double entmax_tau_bisect(const std::vector<double>& z) {
  double hi = *std::max_element(z.begin(), z.end()), lo = hi - 1.0;
  for (int it = 0; it < 200; ++it) {
    double mid = 0.5 * (lo + hi), f = -1.0;
    for (double x : z) f += x > mid ? (x - mid) * (x - mid) : 0.0;
    (f > 0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

struct RefOut {
  std::vector<double> o;     // [H, n_q, d]; rows not computed are left 0
  std::vector<double> stat;  // [H, n_q]
  std::vector<char> done;    // [H, n_q]
};

// Probabilities of one row from its kept logits; returns the row stat.
double normalise_ref(const Normaliser& n, int n_k, const std::vector<double>& l,
                     std::vector<double>& p) {
  using K = Normaliser::Kind;
  p.assign(l.size(), 0.0);
  if (l.empty()) return 0.0;
  switch (n.kind) {
    case K::Softmax: {
      double m = *std::max_element(l.begin(), l.end()), sum = 0;
      for (size_t x = 0; x < l.size(); ++x) sum += (p[x] = std::exp(l[x] - m));
      for (double& v : p) v /= sum;
      return m + std::log(sum);
    }
    case K::Sigmoid:
      for (size_t x = 0; x < l.size(); ++x)
        p[x] = 1.0 / (1.0 + std::exp(-(l[x] - std::log(double(n_k)) + n.a)));
      return 0.0;
    case K::Relu:
      for (size_t x = 0; x < l.size(); ++x) p[x] = std::pow(std::max(l[x], 0.0), n.a) / n_k;
      return 0.0;
    case K::SoftplusL1: {
      double sum = 0;
      for (size_t x = 0; x < l.size(); ++x)
        sum += (p[x] = std::max(l[x], 0.0) + std::log1p(std::exp(-std::fabs(l[x]))));
      for (double& v : p) v /= sum;
      return std::log(sum);
    }
    case K::Entmax15: {
      std::vector<double> z(l.size());
      for (size_t x = 0; x < l.size(); ++x) z[x] = 0.5 * l[x];
      double tau = entmax_tau_bisect(z);
      for (size_t x = 0; x < l.size(); ++x) p[x] = std::pow(std::max(z[x] - tau, 0.0), 2);
      return tau;
    }
  }
  return 0.0;
}

// Reference output for the listed rows of every head (all rows when selective, which needs them).
RefOut reference(const Problem& p, const KernelSpec& spec, const KeepFn& keep,
                 std::vector<int> rows = {}) {
  if (rows.empty() || spec.selective) {
    rows.resize(p.n_q);
    for (int i = 0; i < p.n_q; ++i) rows[i] = i;
  }
  RefOut r;
  r.o.assign(size_t(p.n_heads) * p.n_q * p.d, 0.0);
  r.stat.assign(size_t(p.n_heads) * p.n_q, 0.0);
  r.done.assign(size_t(p.n_heads) * p.n_q, 0);
  const double scale = p.effective_scale();
  for (int h = 0; h < p.n_heads; ++h) {
    std::vector<double> acc(p.n_k, 0.0), s(p.n_k), logits, probs;
    std::vector<int> kept;
    for (int i : rows) {
      logits.clear();
      kept.clear();
      for (int j = 0; j < p.n_k; ++j) {
        if (!p.visible(i, j) || !keep(h, i, j)) continue;
        double dot = 0;
        for (int k = 0; k < p.d; ++k) dot += double(p.q_row(h, i)[k]) * p.k_row(h, j)[k];
        s[j] = apply_mods_ref(spec.mods, scale * dot, h, p.n_heads, p.qpos(i), p.kpos(j));
        kept.push_back(j);
        logits.push_back(spec.selective ? s[j] - acc[j] : s[j]);
      }
      // Selective: the kept entries' positive scores mask those keys for later queries.
      if (spec.selective)
        for (int j : kept)
          if (p.kpos(j) != 0 && p.kpos(j) != p.qpos(i)) acc[j] += std::max(s[j], 0.0);
      const double stat = normalise_ref(spec.norm, p.n_k, logits, probs);
      double* o = r.o.data() + (size_t(h) * p.n_q + i) * p.d;
      for (size_t x = 0; x < kept.size(); ++x)
        for (int k = 0; k < p.d; ++k) o[k] += probs[x] * p.v_row(h, kept[x])[k];
      r.stat[size_t(h) * p.n_q + i] = stat;
      r.done[size_t(h) * p.n_q + i] = 1;
    }
  }
  return r;
}

// ---- layouts and masks for the tests ----------------------------------------------------------

// Keeps a key when the distance is small or not 1 mod 3 (a test pattern with holes everywhere).
class StripeMask : public Mask {
 public:
  bool keep(int32_t qp, int32_t kp) const override {
    const int64_t dist = int64_t(qp) - kp;
    return std::llabs(dist) < 4 || ((dist % 3) + 3) % 3 != 1;
  }
  BlockClass classify(int32_t, int32_t, int32_t, int32_t) const override {
    return BlockClass::Partial;
  }
};

BlockLayout random_blocks(const Problem& p, int bq, int bk, double keep_prob, double full_prob,
                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  BlockLayout b;
  b.bq = bq;
  b.bk = bk;
  b.n_qb = (p.n_q + bq - 1) / bq;
  b.n_kb = (p.n_k + bk - 1) / bk;
  b.row_ptr.push_back(0);
  for (int r = 0; r < b.n_qb; ++r) {
    for (int c = 0; c < b.n_kb; ++c) {
      if (u(rng) >= keep_prob) continue;
      b.col.push_back(c);
      b.full.push_back(u(rng) < full_prob ? 1 : 0);
    }
    b.row_ptr.push_back(int32_t(b.col.size()));
  }
  return b;
}

KeepFn block_keep(const Layout& l, const Problem& p) {
  return [&l, &p](int h, int i, int j) {
    const BlockLayout& b = l.block(h);
    const int r = i / b.bq, c = j / b.bk;
    for (int e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e)
      if (b.col[e] == c) return b.full[e] || !l.mask || l.mask->keep(p.qpos(i), p.kpos(j));
    return false;
  };
}

IndexLayout random_indices(const Problem& p, double prob, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  IndexLayout x;
  x.row_ptr.push_back(0);
  for (int i = 0; i < p.n_q; ++i) {
    if (i % 11 != 5)  // every 11th row keeps nothing
      for (int j = 0; j < p.n_k; ++j)
        if (p.visible(i, j) && u(rng) < prob) x.col.push_back(j);
    x.row_ptr.push_back(int64_t(x.col.size()));
  }
  return x;
}

KeepFn index_keep(const Layout& l) {
  return [&l](int h, int i, int j) {
    const IndexLayout& x = l.index(h);
    return std::binary_search(x.col.begin() + x.row_ptr[i], x.col.begin() + x.row_ptr[i + 1], j);
  };
}

KeepFn dense_keep() {
  return [](int, int, int) { return true; };
}

// ---- comparison -------------------------------------------------------------------------------

std::string describe(const Problem& p, const KernelSpec& s, const std::string& layout) {
  std::ostringstream os;
  os << "H=" << p.n_heads << " Hkv=" << p.n_kv_heads << " n_q=" << p.n_q << " n_k=" << p.n_k
     << " d=" << p.d << (p.causal ? " causal" : " bidirectional") << " layout=" << layout
     << " norm=" << int(s.norm.kind) << "(a=" << s.norm.a << ") mods=";
  for (const ScoreMod& m : s.mods) os << int(m.kind) << "(" << m.a << ")";
  if (s.selective) os << " selective";
  return os.str();
}

Result run_cpu(const Problem& p, const Layout& l, const KernelSpec& spec, int threads = 0,
               const cpu::KernelSet* isa = nullptr) {
  cpu::CpuBackend b(isa);
  RunOptions opt;
  opt.threads = threads;
  return b.execute_spec(spec, p, l, opt);
}

void expect_matches_isa(const Problem& p, const Layout& l, const KernelSpec& spec,
                        const RefOut& ref, const std::string& layout_name,
                        const cpu::KernelSet* isa) {
  const std::string what = describe(p, spec, layout_name);
  Result r = run_cpu(p, l, spec, 0, isa);
  ASSERT_EQ(r.o.size(), size_t(p.n_heads) * p.n_q * p.d) << what;
  ASSERT_EQ(r.row_stat.size(), size_t(p.n_heads) * p.n_q) << what;
  for (float x : r.o) ASSERT_TRUE(std::isfinite(x)) << what;
  for (float x : r.row_stat) ASSERT_TRUE(std::isfinite(x)) << what;
  double num = 0, den = 0;
  for (size_t row = 0; row < ref.done.size(); ++row) {
    if (!ref.done[row]) continue;
    for (int k = 0; k < p.d; ++k) {
      const double a = r.o[row * p.d + k], b = ref.o[row * p.d + k];
      num += (a - b) * (a - b);
      den += b * b;
    }
    EXPECT_NEAR(r.row_stat[row], ref.stat[row], 2e-5 * std::max(1.0, std::fabs(ref.stat[row])))
        << what << " row stat of row " << row;
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LT(rel, 1e-5) << what;
  EXPECT_EQ(r.stats.backend, "cpu");
  EXPECT_GT(r.stats.counted.flops, 0) << what;
  EXPECT_GT(r.stats.counted.bytes, 0) << what;
}

// Relative Frobenius error over the rows the oracle computed, row stats, and no NaN/Inf; for
// every instruction-set build of the kernels this machine runs (AVX-512 and the baseline).
void expect_matches(const Problem& p, const Layout& l, const KernelSpec& spec, const KeepFn& keep,
                    const std::string& layout_name, std::vector<int> rows = {}) {
  const RefOut ref = reference(p, spec, keep, rows);
  for (const cpu::KernelSet* isa : cpu::available_kernel_sets())
    expect_matches_isa(p, l, spec, ref, layout_name + " isa=" + isa->isa, isa);
}

Problem with_positions(Problem p, uint64_t seed, int32_t q_lo, int32_t k_lo, int spread) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> gap(1, spread);
  p.q_pos.resize(p.n_q);
  p.k_pos.resize(p.n_k);
  int32_t x = k_lo;
  for (auto& v : p.k_pos) v = (x += gap(rng));
  x = q_lo;
  for (auto& v : p.q_pos) v = (x += gap(rng));
  return p;
}

KernelSpec softmax_spec() {
  return KernelSpec{};
}

std::vector<KernelSpec> all_normalisers() {
  using K = Normaliser::Kind;
  std::vector<KernelSpec> out;
  for (auto [kind, a] : std::vector<std::pair<K, float>>{{K::Softmax, 0.0f},
                                                         {K::Sigmoid, 0.0f},
                                                         {K::Sigmoid, 1.5f},
                                                         {K::Relu, 1.0f},
                                                         {K::Relu, 2.0f},
                                                         {K::Relu, 1.5f},
                                                         {K::Entmax15, 0.0f},
                                                         {K::SoftplusL1, 0.0f}}) {
    KernelSpec s;
    s.norm.kind = kind;
    s.norm.a = a;
    out.push_back(s);
  }
  return out;
}

std::vector<std::vector<ScoreMod>> all_mod_lists() {
  using K = ScoreMod::Kind;
  return {{},
          {{K::Temperature, 0.7f}},
          {{K::Alibi, 8.0f}},
          {{K::Softcap, 5.0f}},
          {{K::Temperature, 1.3f}, {K::Alibi, 8.0f}, {K::Softcap, 2.0f}}};
}

}  // namespace

// ---- dense --------------------------------------------------------------------------------------

TEST(CpuKernels, DenseCausalAndBidirectionalOverHeadDims) {
  for (int d : {32, 64, 128, 40, 80, 96, 3}) {
    for (bool causal : {true, false}) {
      Problem p = random_problem(2, 2, 77, 77, d, causal, 100 + d);
      expect_matches(p, Layout{}, softmax_spec(), dense_keep(), "dense");
    }
  }
}

TEST(CpuKernels, GroupedQueryAttention) {
  Problem p = random_problem(6, 2, 50, 50, 64, true, 7);
  expect_matches(p, Layout{}, softmax_spec(), dense_keep(), "dense");
  p = random_problem(4, 1, 33, 33, 40, false, 8);
  expect_matches(p, Layout{}, softmax_spec(), dense_keep(), "dense");
}

TEST(CpuKernels, OddSizesSingleHead) {
  for (int n : {1, 7, 77, 1000}) {
    Problem p = random_problem(1, 1, n, n, 32, true, 200 + n);
    expect_matches(p, Layout{}, softmax_spec(), dense_keep(), "dense");
  }
  // A long row: check a sample of rows against the oracle.
  const int n = quick() ? 1500 : 4097;
  Problem p = random_problem(1, 1, n, n, 32, true, 4097);
  std::vector<int> rows = {0, 1, 63, 64, 65, 127, 128, 1000, n / 2, n - 65, n - 64, n - 2, n - 1};
  expect_matches(p, Layout{}, softmax_spec(), dense_keep(), "dense", rows);
}

TEST(CpuKernels, ExplicitPositionsAndUnequalLengths) {
  // Queries later than every key, interleaved, and earlier than some keys (empty rows).
  for (auto [q_lo, k_lo] : std::vector<std::pair<int, int>>{{300, 0}, {0, 0}, {0, 40}}) {
    for (bool causal : {true, false}) {
      Problem p = with_positions(random_problem(2, 1, 37, 91, 40, causal, 9), 10, q_lo, k_lo, 4);
      expect_matches(p, Layout{}, softmax_spec(), dense_keep(), "dense");
      for (const KernelSpec& s : all_normalisers())
        expect_matches(p, Layout{}, s, dense_keep(), "dense");
    }
  }
  // Default positions with n_q < n_k: the queries are the last tokens.
  Problem p = random_problem(3, 3, 20, 150, 64, true, 11);
  expect_matches(p, Layout{}, softmax_spec(), dense_keep(), "dense");
}

TEST(CpuKernels, EveryNormaliserAndScoreMod) {
  const int n = quick() ? 70 : 140;
  Problem p = random_problem(3, 1, n, n, 64, true, 12, 1.5f);
  for (KernelSpec s : all_normalisers()) {
    for (const auto& mods : all_mod_lists()) {
      s.mods = mods;
      expect_matches(p, Layout{}, s, dense_keep(), "dense");
    }
  }
}

TEST(CpuKernels, RowsWithNoKeptKeyGiveZero) {
  // Every query precedes every key under the causal rule.
  Problem p = with_positions(random_problem(1, 1, 5, 9, 16, true, 13), 14, 0, 100, 3);
  for (const KernelSpec& s : all_normalisers()) {
    Result r = run_cpu(p, Layout{}, s);
    for (float x : r.o) EXPECT_EQ(x, 0.0f);
    for (float x : r.row_stat) EXPECT_EQ(x, 0.0f);
  }
}

// ---- block-sparse -------------------------------------------------------------------------------

TEST(CpuKernels, BlockLayoutsFullAndPartial) {
  struct Case {
    int n_q, n_k, bq, bk;
    bool causal;
  };
  for (const Case& cs : std::vector<Case>{{200, 200, 64, 64, true},
                                          {200, 200, 48, 32, true},
                                          {300, 300, 100, 70, true},
                                          {130, 257, 16, 16, false},
                                          {257, 257, 128, 128, true},
                                          {64, 64, 7, 5, true}}) {
    if (quick() && cs.n_q * cs.n_k > 200 * 200) continue;
    Problem p = random_problem(2, 1, cs.n_q, cs.n_k, 64, cs.causal, 20 + cs.bq);
    if (cs.n_q != cs.n_k) p = with_positions(p, 21, 50, 0, 2);
    for (bool with_mask : {false, true}) {
      Layout l;
      l.kind = Layout::Kind::Blocks;
      l.blocks = {random_blocks(p, cs.bq, cs.bk, 0.5, 0.5, 22),
                  random_blocks(p, cs.bq, cs.bk, 0.3, 0.2, 23)};
      if (with_mask) l.mask = std::make_shared<StripeMask>();
      expect_matches(p, l, softmax_spec(), block_keep(l, p), "blocks");
      for (KernelSpec s : all_normalisers()) {
        s.mods = {{ScoreMod::Kind::Alibi, 8.0f}, {ScoreMod::Kind::Softcap, 4.0f}};
        expect_matches(p, l, s, block_keep(l, p), "blocks");
      }
    }
  }
}

TEST(CpuKernels, SharedBlockLayoutAndCountedWorkScalesWithDensity) {
  Problem p = random_problem(4, 4, 512, 512, 64, false, 30);
  Layout dense;
  Result rd = run_cpu(p, dense, softmax_spec());
  EXPECT_DOUBLE_EQ(rd.stats.counted.flops, 4.0 * 64 * 4 * 512 * 512);
  Layout l;
  l.kind = Layout::Kind::Blocks;
  l.blocks = {random_blocks(p, 64, 64, 0.25, 1.0, 31)};
  expect_matches(p, l, softmax_spec(), block_keep(l, p), "blocks(shared)");
  Result rs = run_cpu(p, l, softmax_spec());
  EXPECT_DOUBLE_EQ(rs.stats.counted.flops, 4.0 * 64 * 4 * 64 * 64 * double(l.blocks[0].nnz()));
}

TEST(CpuKernels, DroppedEntriesContributeNothing) {
  // Key block 1 is dropped for every query: giving those keys huge K and V must not change O.
  Problem p = random_problem(2, 2, 192, 192, 32, true, 40);
  Layout l;
  l.kind = Layout::Kind::Blocks;
  BlockLayout b = random_blocks(p, 64, 64, 1.0, 1.0, 41);
  BlockLayout kept = b;
  kept.col.clear();
  kept.full.clear();
  kept.row_ptr = {0};
  for (int r = 0; r < b.n_qb; ++r) {
    for (int e = b.row_ptr[r]; e < b.row_ptr[r + 1]; ++e)
      if (b.col[e] != 1) {
        kept.col.push_back(b.col[e]);
        kept.full.push_back(1);
      }
    kept.row_ptr.push_back(int32_t(kept.col.size()));
  }
  l.blocks = {kept};
  for (const KernelSpec& s : all_normalisers()) {
    Result before = run_cpu(p, l, s);
    Problem q = p;
    for (int h = 0; h < 2; ++h)
      for (int j = 64; j < 128; ++j)
        for (int k = 0; k < 32; ++k) {
          q.k[(size_t(h) * 192 + j) * 32 + k] = 1e6f;
          q.v[(size_t(h) * 192 + j) * 32 + k] = -1e6f;
        }
    Result after = run_cpu(q, l, s);
    EXPECT_EQ(before.o, after.o) << "normaliser " << int(s.norm.kind);
    EXPECT_EQ(before.row_stat, after.row_stat);
  }
}

// ---- index-sparse -------------------------------------------------------------------------------

TEST(CpuKernels, IndexLayouts) {
  for (int d : {32, 64, 40}) {
    Problem p = random_problem(2, 1, 150, 150, d, true, 50 + d);
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices = {random_indices(p, 0.3, 51), random_indices(p, 0.6, 52)};
    for (KernelSpec s : all_normalisers()) {
      expect_matches(p, l, s, index_keep(l), "indices");
      s.mods = {{ScoreMod::Kind::Temperature, 0.5f}, {ScoreMod::Kind::Alibi, 8.0f}};
      expect_matches(p, l, s, index_keep(l), "indices");
    }
  }
  Problem p = with_positions(random_problem(1, 1, 40, 100, 64, true, 53), 54, 30, 0, 3);
  Layout l;
  l.kind = Layout::Kind::Indices;
  l.indices = {random_indices(p, 0.8, 55)};
  expect_matches(p, l, softmax_spec(), index_keep(l), "indices");
}

// The three ways the gather kernel runs a tile of rows: lists that fill most of their key range
// (a dense tile over the range, in place), lists that share scattered keys (a dense tile over
// their packed union) and sparse random lists (each row gathers its own keys).
TEST(CpuKernels, IndexLayoutsRangeUnionAndGatheredTiles) {
  Problem p = random_problem(3, 1, 1037, 1037, 64, true, 70);
  std::mt19937_64 rng(71);
  IndexLayout shared;  // 48 keys every row lists (where visible) plus its own last 3
  std::vector<int> common(48);
  for (int& j : common) j = int(rng() % 1037);
  std::sort(common.begin(), common.end());
  common.erase(std::unique(common.begin(), common.end()), common.end());
  shared.row_ptr.push_back(0);
  for (int i = 0; i < p.n_q; ++i) {
    std::vector<int32_t> keys;
    for (int j : common)
      if (j < i - 2) keys.push_back(j);
    for (int j = std::max(0, i - 2); j <= i; ++j) keys.push_back(j);
    shared.col.insert(shared.col.end(), keys.begin(), keys.end());
    shared.row_ptr.push_back(int64_t(shared.col.size()));
  }
  Layout l;
  l.kind = Layout::Kind::Indices;
  l.indices = {random_indices(p, 0.7, 72), shared, random_indices(p, 0.02, 73)};
  for (const KernelSpec& s : all_normalisers()) expect_matches(p, l, s, index_keep(l), "indices");
}

// ---- lines --------------------------------------------------------------------------------------

// Random columns, and offsets that include 0, runs of neighbours, negative ones (keys after the
// query, seen without the causal rule) and ones crossing the columns.
LineLayout random_lines(const Problem& p, int n_cols, int n_offs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  LineLayout x;
  for (int e = 0; e < n_cols; ++e) x.columns.push_back(int32_t(rng() % uint64_t(p.n_k)));
  std::sort(x.columns.begin(), x.columns.end());
  x.columns.erase(std::unique(x.columns.begin(), x.columns.end()), x.columns.end());
  const int64_t span = int64_t(p.qpos(p.n_q - 1)) - p.kpos(0) + 1;
  std::vector<int64_t> offs = {0, 1, 2, 3};
  for (int e = 0; e < n_offs; ++e) offs.push_back(int64_t(rng() % uint64_t(span + 8)) - 4);
  std::sort(offs.begin(), offs.end(), std::greater<>());
  offs.erase(std::unique(offs.begin(), offs.end()), offs.end());
  x.offsets = offs;
  return x;
}

// Kept set of lines from their definition, causal rule excluded.
KeepFn line_keep(const Layout& l, const Problem& p) {
  return [&l, &p](int h, int i, int j) {
    const LineLayout& x = l.line(h);
    if (std::binary_search(x.columns.begin(), x.columns.end(), j)) return true;
    const int64_t o = int64_t(p.qpos(i)) - p.kpos(j);
    return std::find(x.offsets.begin(), x.offsets.end(), o) != x.offsets.end();
  };
}

TEST(CpuKernels, LineLayoutsMatchTheReferenceAndTheirLists) {
  struct Case {
    int H, Hkv, n_q, n_k, d;
    bool causal;
    int cols, offs;
  };
  std::vector<Case> cases = {{2, 1, 77, 77, 64, true, 9, 12},
                             {3, 3, 130, 300, 24, false, 40, 30},
                             {2, 2, 1, 50, 16, true, 5, 5},
                             {2, 1, 200, 131, 80, true, 300, 70},
                             {3, 1, 1037, 1037, 64, true, 128, 128}};
  if (!quick()) cases.push_back({2, 1, 4099, 4099, 64, true, 128, 128});
  uint64_t seed = 900;
  for (const Case& k : cases) {
    const Problem p = random_problem(k.H, k.Hkv, k.n_q, k.n_k, k.d, k.causal, seed++);
    Layout l;
    l.kind = Layout::Kind::Lines;
    for (int h = 0; h < p.n_heads; ++h) l.lines.push_back(random_lines(p, k.cols, k.offs, seed++));
    const KeepFn keep = line_keep(l, p);
    // The layout's own queries agree with the definition and with its per-query lists.
    const Layout listed = lines_to_indices(l, p);
    ASSERT_EQ(listed.kind, Layout::Kind::Indices);
    for (int h = 0; h < p.n_heads; ++h) {
      int64_t want = 0;
      std::vector<int32_t> keys;
      for (int i = 0; i < p.n_q; i += std::max(1, p.n_q / 97)) {
        layout_row_keys(l, p, h, i, keys);
        std::vector<int32_t> expect;
        for (int j = 0; j < p.n_k; ++j)
          if (p.visible(i, j) && keep(h, i, j)) expect.push_back(j);
        ASSERT_EQ(keys, expect) << "head " << h << " row " << i;
        for (int j = 0; j < p.n_k; j += 7)
          ASSERT_EQ(layout_keeps(l, p, h, i, j), p.visible(i, j) && keep(h, i, j));
      }
      for (int i = 0; i < p.n_q; ++i)
        for (int j = 0; j < p.n_k; ++j) want += p.visible(i, j) && keep(h, i, j);
      EXPECT_EQ(layout_kept_entries(l, p, h), want) << "head " << h;
      EXPECT_EQ(listed.index(h).nnz(), want) << "head " << h;
    }
    std::vector<int> rows;
    if (p.n_q > 2000)
      for (int i : {0, 1, 63, 64, 65, 1000, p.n_q / 2, p.n_q - 65, p.n_q - 2, p.n_q - 1})
        rows.push_back(i);
    expect_matches(p, l, softmax_spec(), keep, "lines", rows);  // the lines kernel
    if (p.n_q <= 2000)                                          // other normalisers run the lists
      for (const KernelSpec& s : all_normalisers()) expect_matches(p, l, s, keep, "lines");
    // The lines kernel and the gather kernel on the same kept set.
    const Result a = run_cpu(p, l, softmax_spec()), b = run_cpu(p, listed, softmax_spec());
    for (size_t e = 0; e < a.o.size(); ++e) ASSERT_NEAR(a.o[e], b.o[e], 2e-5) << e;
    for (size_t e = 0; e < a.row_stat.size(); ++e) ASSERT_NEAR(a.row_stat[e], b.row_stat[e], 2e-5);
    EXPECT_EQ(a.layout.kind, Layout::Kind::Lines);  // the result keeps the compact layout
  }
  // Explicit positions run the lists.
  const Problem q = with_positions(random_problem(2, 1, 60, 90, 32, true, 910), 911, 40, 0, 2);
  Layout l;
  l.kind = Layout::Kind::Lines;
  l.lines = {random_lines(q, 10, 20, 912)};
  expect_matches(q, l, softmax_spec(), line_keep(l, q), "lines with positions");
}

TEST(CpuKernels, BadLineLayoutsAreRefused) {
  const Problem p = random_problem(2, 1, 40, 40, 16, true, 920);
  auto refused = [&](LineLayout x, int copies) {
    Layout l;
    l.kind = Layout::Kind::Lines;
    l.lines.assign(size_t(copies), x);
    try {
      run_cpu(p, l, softmax_spec());
      return false;
    } catch (const Error& e) {
      return e.code() == ErrorCode::InvalidArgument;
    }
  };
  EXPECT_TRUE(refused({{3, 2}, {0}}, 1));              // columns not ascending
  EXPECT_TRUE(refused({{3, 40}, {0}}, 1));             // column out of range
  EXPECT_TRUE(refused({{-1}, {0}}, 1));                // negative column
  EXPECT_TRUE(refused({{1}, {0, 5}}, 1));              // offsets ascending
  EXPECT_TRUE(refused({{1}, {5, 5}}, 1));              // offset twice
  EXPECT_TRUE(refused({{1}, {0}}, 3));                 // neither one layout nor one per head
  EXPECT_TRUE(refused({{1}, {int64_t(1) << 32}}, 1));  // beyond any position difference
  const int64_t far = (int64_t(1) << 32) - 1;
  EXPECT_FALSE(refused({{}, {far, 0, -far}}, 2));  // far offsets keep nothing
}

// Index layouts whose keys fall, repeat or leave [0, n_k) anywhere in a long row (past the
// check's vector steps, in them, and in the tail) are refused with the query named.
TEST(CpuKernels, BadIndexLayoutsAreRefused) {
  const int n = 300;
  const Problem p = random_problem(2, 1, n, n, 16, false, 925);
  auto with_row = [&](std::vector<int32_t> keys) {
    IndexLayout x;
    x.row_ptr.assign(size_t(n) + 1, 0);
    for (int i = 0; i < n; ++i) x.row_ptr[size_t(i) + 1] = x.row_ptr[size_t(i)] + (i == 7 ? 0 : 1);
    for (int i = 0; i < n; ++i)
      if (i != 7) x.col.push_back(i);
    // Query 7's keys go in its place.
    x.col.insert(x.col.begin() + x.row_ptr[7], keys.begin(), keys.end());
    for (int i = 8; i <= n; ++i) x.row_ptr[size_t(i)] += int64_t(keys.size());
    Layout l;
    l.kind = Layout::Kind::Indices;
    l.indices = {x};
    return l;
  };
  auto message = [&](std::vector<int32_t> keys) -> std::string {
    try {
      run_cpu(p, with_row(std::move(keys)), softmax_spec());
      return "";
    } catch (const Error& e) {
      return e.code() == ErrorCode::InvalidArgument ? e.what() : "wrong code";
    }
  };
  std::vector<int32_t> good(37);
  for (int k = 0; k < 37; ++k) good[size_t(k)] = 3 * k + 1;
  EXPECT_EQ(message(good), "");
  for (size_t at : {size_t(1), size_t(5), size_t(8), size_t(20), size_t(33), size_t(36)}) {
    std::vector<int32_t> fall = good, same = good;
    fall[at] = fall[at - 1] - 1;
    same[at] = same[at - 1];
    EXPECT_NE(message(fall).find("keys not ascending for query 7"), std::string::npos) << at;
    EXPECT_NE(message(same).find("keys not ascending for query 7"), std::string::npos) << at;
  }
  std::vector<int32_t> high = good, low = good;
  high.back() = n;
  low.front() = -1;
  EXPECT_NE(message(high).find("out of range for query 7"), std::string::npos);
  EXPECT_NE(message(low).find("out of range for query 7"), std::string::npos);
}

// ---- selective ----------------------------------------------------------------------------------

TEST(CpuKernels, SelectiveAttention) {
  for (int n : {1, 7, 77, 200}) {
    Problem p = random_problem(2, 1, n, n, 32, true, 60 + n, 1.5f);
    for (KernelSpec s : all_normalisers()) {
      s.selective = true;
      expect_matches(p, Layout{}, s, dense_keep(), "dense");
    }
  }
  Problem p = random_problem(2, 2, 130, 130, 64, true, 61, 1.5f);
  KernelSpec s;
  s.selective = true;
  s.mods = {{ScoreMod::Kind::Softcap, 5.0f}};
  Layout blocks;
  blocks.kind = Layout::Kind::Blocks;
  blocks.blocks = {random_blocks(p, 32, 32, 0.6, 0.5, 62)};
  blocks.mask = std::make_shared<StripeMask>();
  expect_matches(p, blocks, s, block_keep(blocks, p), "blocks");
  Layout idx;
  idx.kind = Layout::Kind::Indices;
  idx.indices = {random_indices(p, 0.5, 63)};
  expect_matches(p, idx, s, index_keep(idx), "indices");
  // Explicit positions with n_q != n_k.
  Problem q = with_positions(random_problem(1, 1, 30, 70, 32, true, 64), 65, 40, 0, 2);
  expect_matches(q, Layout{}, s, dense_keep(), "dense");
}

// ---- threads, cancellation, errors --------------------------------------------------------------

TEST(CpuKernels, ThreadCountDoesNotChangeResults) {
  Problem p = random_problem(3, 3, 300, 300, 64, true, 70);
  Result a = run_cpu(p, Layout{}, softmax_spec(), 1);
  Result b = run_cpu(p, Layout{}, softmax_spec(), 3);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.row_stat, b.row_stat);
}

TEST(CpuKernels, CancelFlagThrowsCancelled) {
  Problem p = random_problem(2, 2, 256, 256, 32, true, 80);
  std::atomic<bool> cancel{true};
  RunOptions opt;
  opt.cancel = &cancel;
  cpu::CpuBackend b;
  for (bool selective : {false, true}) {
    KernelSpec s;
    s.selective = selective;
    try {
      b.execute_spec(s, p, Layout{}, opt);
      FAIL() << "cancelled run returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Cancelled);
    }
  }
  cancel = false;
  EXPECT_NO_THROW(b.execute_spec(softmax_spec(), p, Layout{}, opt));
}

TEST(CpuKernels, BadLayoutsGiveClearErrors) {
  Problem p = random_problem(2, 2, 100, 100, 32, true, 90);
  Layout l;
  l.kind = Layout::Kind::Blocks;
  l.blocks = {random_blocks(p, 32, 32, 0.5, 1.0, 91)};
  l.blocks[0].col.back() = 99;
  try {
    run_cpu(p, l, softmax_spec());
    FAIL() << "out-of-range key block accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
  l.blocks = {random_blocks(p, 32, 32, 0.5, 1.0, 91), random_blocks(p, 32, 32, 0.5, 1.0, 92),
              random_blocks(p, 32, 32, 0.5, 1.0, 93)};
  EXPECT_THROW(run_cpu(p, l, softmax_spec()), Error);  // 3 layouts for 2 heads
  Layout x;
  x.kind = Layout::Kind::Indices;
  x.indices = {random_indices(p, 0.5, 94)};
  x.indices[0].row_ptr.pop_back();
  try {
    run_cpu(p, x, softmax_spec());
    FAIL() << "short row_ptr accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row_ptr"), std::string::npos) << e.what();
  }
  Problem bad = p;
  bad.v.pop_back();
  EXPECT_THROW(run_cpu(bad, Layout{}, softmax_spec()), Error);
}

TEST(CpuKernels, InstructionSetBuildsAgree) {
  const std::vector<const cpu::KernelSet*> sets = cpu::available_kernel_sets();
  ASSERT_FALSE(sets.empty());
  EXPECT_EQ(sets.back(), &cpu::baseline_kernels());
  Problem p = random_problem(2, 1, 333, 333, 40, true, 100);
  KernelSpec s;
  s.mods = {{ScoreMod::Kind::Softcap, 8.0f}};
  const Result base = run_cpu(p, Layout{}, s, 0, sets.back());
  for (const cpu::KernelSet* isa : sets) {
    cpu::CpuBackend b(isa);
    EXPECT_STREQ(b.isa(), isa->isa);
    const Result r = run_cpu(p, Layout{}, s, 0, isa);
    double num = 0, den = 0;
    for (size_t x = 0; x < r.o.size(); ++x) {
      num += double(r.o[x] - base.o[x]) * (r.o[x] - base.o[x]);
      den += double(base.o[x]) * base.o[x];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-6) << isa->isa;
  }
}
