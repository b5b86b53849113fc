// Reduced-precision storage in the cpu kernels (RunOptions::precision = bf16 | f16): the stored
// 16-bit values are exactly kv_precision.h's round to nearest even of the inputs (every kernel
// set, the AMX set's transposed V too); each kernel (dense, blocks, key lists, lines) in each
// precision against the f64 reference, (a) on the rounded inputs, where only f32 accumulation
// (and, on AMX tiles, probabilities rounded to bf16) may differ, so a changed rounding of Q, K or
// V fails by orders of magnitude, and (b) on the original inputs, within a bound derived from the
// format's unit roundoff; results name their precision; every kernel set is chosen by
// ATTNSCOPE_CPU_ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "compute/cpu/amx_tiles.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/dpbf16_tiles.h"
#include "compute/cpu/kernel_context.h"
#include "compute/cpu/kernel_set.h"
#include "compute/cpu/thread_pool.h"
#include "compute/error.h"
#include "compute/half_bits.h"
#include "compute/kv/kv_precision.h"
#include "compute/metrics.h"
#include "compute/precision.h"
#include "compute/reference/reference_backend.h"
#include "compute/registry.h"
#include "test_util.h"

using namespace attn;

namespace {

// The bits kv_precision.h's rounding stores for x.
uint16_t expected_bits(Precision prec, float x) {
  if (prec == Precision::Bf16) return bf16_value_to_bits(round_bf16(x));
  return f16_value_to_bits(round_fp16(x));
}

// A problem whose values include exact ties of both formats (x.5 ulp) and wide magnitudes.
Problem tie_problem(int n, int d) {
  Problem p = random_problem(2, 1, n, n, d, true, 4242);
  std::mt19937 rng(5);
  auto ties = [&](AlignedFloats& x) {
    for (size_t i = 0; i < x.size(); i += 3) {
      // 1 + m 2^-7 + 2^-8 (a bf16 tie) and 1 + m 2^-10 + 2^-11 (an f16 tie), scaled.
      const int m = int(rng() % 100);
      const float scale = std::ldexp(1.0f, int(rng() % 20) - 10) * (rng() % 2 ? 1 : -1);
      x[i] = (i % 2 ? 1.0f + m * 0x1p-7f + 0x1p-8f : 1.0f + m * 0x1p-10f + 0x1p-11f) * scale;
    }
  };
  ties(p.q);
  ties(p.k);
  ties(p.v);
  return p;
}

// The problem with Q, K and V replaced by their values in `prec`.
Problem rounded(Problem p, Precision prec) {
  for (AlignedFloats* x : {&p.q, &p.k, &p.v})
    for (float& v : *x) v = prec == Precision::Bf16 ? round_bf16(v) : round_fp16(v);
  return p;
}

std::vector<Precision> half_precisions() {
  return {Precision::Bf16, Precision::F16};
}

// ---- layouts, one per kernel ----

Layout block_layout(const Problem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  BlockLayout b;
  b.bq = b.bk = 32;
  b.n_qb = (p.n_q + 31) / 32;
  b.n_kb = (p.n_k + 31) / 32;
  b.row_ptr.push_back(0);
  for (int r = 0; r < b.n_qb; ++r) {
    for (int c = 0; c < b.n_kb; ++c)
      if (c == r || rng() % 3 == 0) {
        b.col.push_back(c);
        b.full.push_back(1);
      }
    b.row_ptr.push_back(int32_t(b.col.size()));
  }
  Layout l;
  l.kind = Layout::Kind::Blocks;
  l.blocks = {b};
  return l;
}

Layout index_layout(const Problem& p, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  IndexLayout x;
  x.row_ptr.push_back(0);
  for (int i = 0; i < p.n_q; ++i) {
    const int visible = p.causal ? p.qpos(i) + 1 : p.n_k;
    for (int j = 0; j < visible; ++j)
      if (visible <= k || int(rng() % uint64_t(visible)) < k) x.col.push_back(j);
    x.row_ptr.push_back(int64_t(x.col.size()));
  }
  Layout l;
  l.kind = Layout::Kind::Indices;
  l.indices = {x};
  return l;
}

Layout line_layout(const Problem& p) {
  LineLayout x;
  for (int j = 3; j < p.n_k; j += 37) x.columns.push_back(j);
  for (int64_t o : {200, 90, 17, 5, 0}) x.offsets.push_back(o);
  Layout l;
  l.kind = Layout::Kind::Lines;
  l.lines = {x};
  return l;
}

struct KernelCase {
  std::string name;
  Layout layout;
};

std::vector<KernelCase> kernel_cases(const Problem& p) {
  return {{"dense", Layout{}},
          {"blocks", block_layout(p, 11)},
          {"key lists (top-40)", index_layout(p, 40, 12)},
          {"key lists (dense rows)", index_layout(p, 100000, 13)},
          {"lines", line_layout(p)}};
}

Result run_in(const cpu::KernelSet* set, const Variant& v, const Problem& p, const Layout& l,
              Precision prec) {
  cpu::CpuBackend b(set);
  RunOptions opt;
  opt.precision = prec;
  return b.execute(v, p, l, opt);
}

// Largest relative Frobenius error that f32 accumulation of n-term dot products leaves here.
constexpr double kF32Tol = 2e-5;

// Every output finite, within `tol` (relative Frobenius) of want, and every row's statistic
// (its log-sum-exp) within 1e-4 relative.
void expect_finite_and_close(const Result& r, const Result& want, double tol,
                             const std::string& what) {
  for (float y : r.o) ASSERT_TRUE(std::isfinite(y)) << what;
  EXPECT_LT(relative_error(r.o, want.o), tol) << what;
  for (size_t i = 0; i < r.row_stat.size(); ++i)
    ASSERT_NEAR(r.row_stat[i], want.row_stat[i], 1e-4 * (1.0 + std::fabs(want.row_stat[i])))
        << what << " row stat " << i;
}

// Causal key lists over n keys: row i lists key j <= i where listed(i, j).
Layout causal_lists(int n, const std::function<bool(int, int)>& listed) {
  IndexLayout x;
  x.row_ptr.push_back(0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j <= i; ++j)
      if (listed(i, j)) x.col.push_back(j);
    x.row_ptr.push_back(int64_t(x.col.size()));
  }
  Layout l;
  l.kind = Layout::Kind::Indices;
  l.indices = {x};
  return l;
}

}  // namespace

TEST(CpuPrecision, PrecisionNamesParseAndRoundoff) {
  for (Precision p : {Precision::F32, Precision::Bf16, Precision::F16})
    EXPECT_EQ(parse_precision(precision_name(p)), p);
  EXPECT_EQ(unit_roundoff(Precision::Bf16), 1.0 / 256);
  EXPECT_EQ(unit_roundoff(Precision::F16), 1.0 / 2048);
  const std::string msg =
      test::error_of([] { parse_precision("bf61"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(test::contains(msg, "bf16")) << msg;
}

TEST(CpuPrecision, StoredValuesAreRoundedToNearestEven) {
  // d = 40: V rows padded to whole vectors; d = 64: the AMX set's transposed V.
  for (int d : {40, 64}) {
    const Problem p = tie_problem(70, d);
    const Layout dense;
    const cpu::KernelSpec spec;
    std::vector<void (*)(const float*, uint16_t*, size_t)> converters = {nullptr};
    if (cpu::amx::has_avx512_bf16()) converters.push_back(&cpu::amx::convert_bf16);
    for (const cpu::KernelSet* set : cpu::available_kernel_sets())
      for (Precision prec : half_precisions())
        for (auto hw : converters) {
          const std::string what = std::string(set->isa) + " " + precision_name(prec) +
                                   " d=" + std::to_string(d) + (hw ? " hardware bf16" : "");
          std::vector<float> o(size_t(p.n_heads) * p.n_q * p.d), stat(size_t(p.n_heads) * p.n_q);
          cpu::KernelContext c(p, dense, spec, set->width, o.data(), stat.data(), prec);
          c.tiles = prec == Precision::Bf16 && d % 32 == 0 ? set->tiles : cpu::TileUnit::None;
          cpu::ThreadPool pool(2);
          set->convert(c, pool, prec == Precision::Bf16 ? hw : nullptr);
          int bad = 0;
          for (int h = 0; h < p.n_heads; ++h)
            for (int i = 0; i < p.n_q; ++i)
              for (int k = 0; k < d; ++k)
                bad += c.q16_row(h, i)[k] != expected_bits(prec, p.q_row(h, i)[k]);
          for (int j = 0; j < p.n_k; ++j)
            for (int k = 0; k < d; ++k) {
              bad += c.k16_row(0, j)[k] != expected_bits(prec, p.k_row(0, j)[k]);
              const uint16_t v =
                  c.bf16_tiles() ? c.vt16_at(0, j)[size_t(k) * c.vt_ld] : c.v16_row(0, j)[k];
              bad += v != expected_bits(prec, p.v_row(0, j)[k]);
            }
          EXPECT_EQ(bad, 0) << what;
          // Padding reads as zero: V's dims up to dv, the transposed V's keys past n_k.
          for (int j = 0; j < p.n_k && !c.bf16_tiles(); ++j)
            for (int k = d; k < c.dv; ++k) ASSERT_EQ(c.v16_row(0, j)[k], 0) << what;
          for (int k = 0; k < c.dv && c.bf16_tiles(); ++k)
            for (size_t j = size_t(p.n_k); j < c.vt_ld; ++j)
              ASSERT_EQ(c.vt16_at(0, 0)[size_t(k) * c.vt_ld + j], 0) << what;
        }
  }
}

// Each kernel in each precision against the f64 reference: (a) on the rounded inputs, (b) on
// the given ones. Bound (b): round to nearest leaves each stored value off by a relative error
// spread evenly over [-u, u] (RMS u / sqrt 3 of the value's binade), which moves scores by about
// that times |q| |k| scale and outputs by about that times |v|: measured 0.6-0.7 u here in
// relative Frobenius error, so the bound is u. Truncating instead (a mutated rounding) doubles
// the RMS error and fails (b), and fails (a) by orders of magnitude.
TEST(CpuPrecision, EachKernelAgainstTheF64Reference) {
  auto reference = make_reference_backend();
  for (int d : {64, 40}) {
    const Problem p = random_problem(3, 3, 300, 300, d, true, 77 + d);
    const Variant v = make_variant("dense");
    for (const KernelCase& kc : kernel_cases(p)) {
      const Result exact = reference->execute(v, p, kc.layout, {});
      for (Precision prec : half_precisions()) {
        const Problem pr = rounded(p, prec);
        const Result on_rounded = reference->execute(v, pr, kc.layout, {});
        const double u = unit_roundoff(prec);
        for (const cpu::KernelSet* set : cpu::available_kernel_sets()) {
          const std::string what =
              kc.name + " " + precision_name(prec) + " isa=" + set->isa + " d=" + std::to_string(d);
          const Result r = run_in(set, v, p, kc.layout, prec);
          EXPECT_EQ(r.stats.precision, prec) << what;
          for (float x : r.o) ASSERT_TRUE(std::isfinite(x)) << what;
          // AMX tiles (dense and block layouts, key lists' dense tiles) also round the
          // probabilities to bf16 (as FlashAttention does): half a unit roundoff bounds what
          // that moves; elsewhere (lines too) only f32 accumulation differs.
          const bool amx =
              (set->tiles != cpu::TileUnit::None) && prec == Precision::Bf16 && d % 32 == 0;
          const double tol_rounded = amx ? 0.5 * u : kF32Tol;
          EXPECT_LT(relative_error(r.o, on_rounded.o), tol_rounded) << what << " (a)";
          EXPECT_LT(relative_error(r.o, exact.o), u) << what << " (b)";
          EXPECT_GT(relative_error(r.o, exact.o), 0.05 * u) << what << " (b): rounding happened";
          // Row statistics come from the f32 scores of the stored values (AMX included).
          for (size_t i = 0; i < r.row_stat.size(); ++i)
            ASSERT_NEAR(r.row_stat[i], on_rounded.row_stat[i],
                        1e-5 * (1.0 + std::fabs(on_rounded.row_stat[i])))
                << what << " row stat " << i;
        }
      }
    }
  }
}

// Key lists that share most of their keys over a wide range (H2O's heavy set): the key-list
// kernel packs their union into dense tiles (on AMX: K rows and V^T packed).
TEST(CpuPrecision, SharedKeyListsRunAsPackedTiles) {
  auto reference = make_reference_backend();
  const Problem p = random_problem(2, 1, 300, 1200, 64, true, 21);
  IndexLayout x;
  x.row_ptr.push_back(0);
  for (int i = 0; i < p.n_q; ++i) {
    for (int j = 5; j < 200; j += 6) x.col.push_back(j);  // 33 heavy keys
    x.col.push_back(p.qpos(i));
    x.row_ptr.push_back(int64_t(x.col.size()));
  }
  Layout l;
  l.kind = Layout::Kind::Indices;
  l.indices = {x};
  for (const char* spec : {"dense", "dense+softplus"}) {
    const Variant v = make_variant(spec);
    for (Precision prec : half_precisions()) {
      const Result ref = reference->execute(v, rounded(p, prec), l, {});
      const double u = unit_roundoff(prec);
      for (const cpu::KernelSet* set : cpu::available_kernel_sets()) {
        const Result r = run_in(set, v, p, l, prec);
        const bool amx = (set->tiles != cpu::TileUnit::None) && prec == Precision::Bf16;
        EXPECT_LT(relative_error(r.o, ref.o), amx ? 0.5 * u : kF32Tol)
            << spec << " " << precision_name(prec) << " " << set->isa;
      }
    }
  }
}

// Long, sparse key lists (a few percent of each row, so no dense tile takes them): the streamed
// rows, which on the AMX set run on bf16 dot products (vdpbf16ps), for head sizes of 1 to 4
// blocks of 32, GQA, a causal N >= 4096 and odd list lengths (pairs of keys padded), and lists
// long enough that a row's segment of one key range spans several chunks (the running max then
// moves, or not, between chunks).
TEST(CpuPrecision, SparseKeyListsOverBf16RowsMatchTheReference) {
  auto reference = make_reference_backend();
  struct Shape {
    int heads, kv_heads, n, d, k;
  };
  for (const Shape& s :
       {Shape{2, 1, 4099, 64, 37}, Shape{3, 3, 1500, 128, 21}, Shape{2, 2, 1300, 32, 50},
        Shape{4, 2, 1200, 96, 17}, Shape{2, 1, 4099, 64, 701}}) {
    const Problem p = random_problem(s.heads, s.kv_heads, s.n, s.n, s.d, true, 500 + s.d);
    const Layout l = index_layout(p, s.k, 31 + s.d);
    const Variant v = make_variant("dense");
    const Result exact = reference->execute(v, p, l, {});
    const Result ref = reference->execute(v, rounded(p, Precision::Bf16), l, {});
    const double u = unit_roundoff(Precision::Bf16);
    for (const cpu::KernelSet* set : cpu::available_kernel_sets()) {
      const std::string what = std::string(set->isa) + " N=" + std::to_string(s.n) +
                               " d=" + std::to_string(s.d) + " k=" + std::to_string(s.k);
      const Result r = run_in(set, v, p, l, Precision::Bf16);
      EXPECT_LT(relative_error(r.o, ref.o), (set->tiles != cpu::TileUnit::None) ? 0.5 * u : kF32Tol)
          << what;
      EXPECT_LT(relative_error(r.o, exact.o), u) << what;
      for (size_t i = 0; i < r.row_stat.size(); ++i)
        ASSERT_NEAR(r.row_stat[i], ref.row_stat[i], 1e-5 * (1.0 + std::fabs(ref.row_stat[i])))
            << what << " row stat " << i;
    }
  }
}

// The same for the other normalisers and modifiers that run through the same kernels.
TEST(CpuPrecision, NormalisersAndModifiersInReducedPrecision) {
  auto reference = make_reference_backend();
  const Problem p = random_problem(2, 1, 200, 200, 64, true, 9);
  for (const char* spec :
       {"dense+sigmoid", "dense+entmax15", "dense+softplus", "dense+alibi+softcap(cap=5)",
        "window(size=40)+relu2", "selective", "topk(k=16)+alibi", "topk(k=16)+entmax15"}) {
    const Variant v = make_variant(spec);
    for (Precision prec : half_precisions()) {
      const Problem pr = rounded(p, prec);
      for (const cpu::KernelSet* set : cpu::available_kernel_sets()) {
        cpu::CpuBackend b(set);
        RunOptions opt;
        opt.precision = prec;
        const Result r = run(v, p, b, opt);
        const Result ref = reference->execute(v, pr, r.layout, {});
        const double u = unit_roundoff(prec);
        const std::string what = std::string(spec) + " " + precision_name(prec) + " " + set->isa;
        const bool amx = (set->tiles != cpu::TileUnit::None) && prec == Precision::Bf16 &&
                         !v.selective() && std::string(spec).find("entmax") == std::string::npos &&
                         (r.layout.kind != Layout::Kind::Indices || v.mods().empty());
        EXPECT_LT(relative_error(r.o, ref.o), amx ? 0.5 * u : (v.selective() ? 1e-4 : kF32Tol))
            << what;
        EXPECT_EQ(r.stats.precision, prec) << what;
      }
    }
  }
}

// Scores hundreds of binary orders apart, against the f64 reference on the rounded inputs: the
// bf16 tile flash subtracts each row's true running max, so nothing overflows or vanishes. A key
// that dwarfs the rest sits inside a chunk every query of a later tile sees (its max found as the
// tile product leaves the registers, at a row that is not the first of its register block) and
// one inside the causal chunk, in the future of most of that tile's queries (whose max must not
// count it: their visible probabilities would all round to zero).
TEST(CpuPrecision, Bf16TilesSubtractTheMaxOfVisibleScores) {
  // N = 320: whole query tiles of 64, so the last tile's keys [128, 256) form an unmasked chunk.
  const int n = 320;
  Problem p = random_problem(2, 2, n, n, 64, true, 5);
  for (int g = 0; g < 2; ++g)
    for (int key : {203, 290})
      for (int e = 0; e < 64; ++e) p.k[(size_t(g) * n + key) * 64 + e] *= 300.0f;
  const Variant v = make_variant("dense");
  const Problem pr = rounded(p, Precision::Bf16);
  const Result want = make_reference_backend()->execute(v, pr, Layout{}, {});
  for (const cpu::KernelSet* set : cpu::available_kernel_sets())
    expect_finite_and_close(run_in(set, v, p, Layout{}, Precision::Bf16), want,
                            0.5 * unit_roundoff(Precision::Bf16), set->isa);
}

// The same for streamed key lists, whose bf16 stream takes probabilities against a reference
// that moves only when a score passes it by a margin: keys whose scores are tens of binary orders
// above the rest (K scaled by 6) and hundreds (by 300) sit late in most rows' lists, after the
// reference was set on ordinary keys, so the stream must rescale its sums rather than overflow.
TEST(CpuPrecision, Bf16KeyListsRescaleWhenAScorePassesTheReference) {
  const int n = 3000;
  Problem p = random_problem(2, 1, n, n, 64, true, 8);
  const std::pair<int, float> loud[] = {{1200, 6.0f}, {1700, 300.0f}, {2400, 300.0f}};
  for (auto [key, f] : loud)
    for (int e = 0; e < 64; ++e) p.k[size_t(key) * 64 + e] *= f;
  std::mt19937_64 rng(12);
  const Layout l = causal_lists(n, [&](int i, int j) {
    return i < 200 || j == 1200 || j == 1700 || j == 2400 || rng() % uint64_t(i + 1) < 200;
  });
  const Variant v = make_variant("dense");
  const Result want = make_reference_backend()->execute(v, rounded(p, Precision::Bf16), l, {});
  for (const cpu::KernelSet* set : cpu::available_kernel_sets())
    expect_finite_and_close(
        run_in(set, v, p, l, Precision::Bf16), want,
        (set->tiles != cpu::TileUnit::None) ? 0.5 * unit_roundoff(Precision::Bf16) : kF32Tol,
        set->isa);
}

// Key lists on bf16 tiles fill V^T only where a dense tile reads it. A backend keeps its 16-bit
// storage between executes, so after a dense run of another problem (V all NaN) any block a tile
// reads unfilled turns its rows NaN: early rows listing whole ranges (range tiles), a vertical
// set every row lists (union tiles), and sparse later rows.
TEST(CpuPrecision, Bf16KeyListsFillVtWhereTheirDenseTilesReadIt) {
  const int n = 1500;
  Problem other = random_problem(2, 1, n, n, 64, true, 41);
  std::fill(other.v.begin(), other.v.end(), std::numeric_limits<float>::quiet_NaN());
  const Problem p = random_problem(2, 1, n, n, 64, true, 42);
  std::mt19937_64 rng(43);
  const Layout l = causal_lists(n, [&](int i, int j) {
    return i < 300 || j % 97 == 5 || j > i - 8 || rng() % uint64_t(i + 1) < 20;
  });
  const Variant v = make_variant("dense");
  const Result want = make_reference_backend()->execute(v, rounded(p, Precision::Bf16), l, {});
  for (const cpu::KernelSet* set : cpu::available_kernel_sets()) {
    if (set->tiles == cpu::TileUnit::None) continue;
    cpu::CpuBackend b(set);
    RunOptions opt;
    opt.precision = Precision::Bf16;
    b.execute(v, other, Layout{}, opt);  // V^T of `other` left in the backend's storage
    const Result r = b.execute(v, p, l, opt);
    EXPECT_LT(relative_error(r.o, want.o), 0.5 * unit_roundoff(Precision::Bf16)) << set->isa;
  }
}

TEST(CpuPrecision, ResultsNameThePrecisionThatRan) {
  const Problem p = random_problem(1, 1, 50, 50, 32, true, 3);
  const Variant v = make_variant("dense");
  auto cpu_b = make_backend("cpu");
  auto ref = make_backend("reference");
  RunOptions opt;
  opt.precision = Precision::Bf16;
  EXPECT_EQ(run(v, p, *cpu_b, opt).stats.precision, Precision::Bf16);
  EXPECT_EQ(run(v, p, *cpu_b, {}).stats.precision, Precision::F32);
  // The reference computes in f64 on the given values whatever is asked, and says so.
  EXPECT_EQ(run(v, p, *ref, opt).stats.precision, Precision::F32);
}

TEST(CpuPrecision, F16BeyondItsRangeIsAClearError) {
  Problem p = random_problem(1, 1, 20, 20, 32, true, 3);
  p.k[7] = 1e6f;
  auto cpu_b = make_backend("cpu");
  RunOptions opt;
  opt.precision = Precision::F16;
  const std::string msg = test::error_of([&] { run(make_variant("dense"), p, *cpu_b, opt); },
                                         ErrorCode::InvalidArgument);
  EXPECT_TRUE(test::contains(msg, "65504")) << msg;
  EXPECT_TRUE(test::contains(msg, "bf16")) << msg;
  opt.precision = Precision::Bf16;  // bf16 keeps f32's range
  EXPECT_NO_THROW(run(make_variant("dense"), p, *cpu_b, opt));
}

// ATTNSCOPE_CPU_ISA picks each kernel set that runs here; an unknown name keeps the best.
TEST(CpuPrecision, IsaEnvironmentVariablePicksEachSet) {
  const char* old = std::getenv("ATTNSCOPE_CPU_ISA");
  const std::string saved = old ? old : "";
  for (const cpu::KernelSet* set : cpu::available_kernel_sets()) {
    setenv("ATTNSCOPE_CPU_ISA", set->isa, 1);
    EXPECT_EQ(&cpu::best_kernels(), set) << set->isa;
    EXPECT_STREQ(cpu::CpuBackend().isa(), set->isa);
  }
  setenv("ATTNSCOPE_CPU_ISA", "no-such-isa", 1);
  EXPECT_EQ(&cpu::best_kernels(), cpu::available_kernel_sets().front());
  if (old)
    setenv("ATTNSCOPE_CPU_ISA", saved.c_str(), 1);
  else
    unsetenv("ATTNSCOPE_CPU_ISA");
}

// The vdpbf16ps tile products against f64 sums of the same bf16 values: scores exactly as
// products of stored values summed in f32, probabilities rounded to bf16 before they meet V^T,
// edges of every kind (odd key counts, 1..4 query vectors, dims not a multiple of the register
// block), and an odd chunk reads nothing of V^T past its last key (a NaN there stays out).
TEST(CpuPrecision, Dpbf16TileProductsMatchF64Sums) {
  if (!cpu::amx::has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto bits = [](float x) { return bf16_value_to_bits(round_bf16(x)); };
  auto value = [](uint16_t b) { return double(bf16_bits_to_float(b)); };
  for (int nj : {1, 7, 33, 64, 128})
    for (int cols : {16, 48, 64})
      for (int d : {32, 64, 96}) {
        const std::string what = "nj=" + std::to_string(nj) + " cols=" + std::to_string(cols) +
                                 " d=" + std::to_string(d);
        std::vector<uint16_t> k(size_t(nj) * d);
        for (auto& x : k) x = bits(nd(rng));
        std::vector<uint32_t> qp(size_t(d / 2) * 64);
        for (auto& x : qp) x = uint32_t(bits(nd(rng))) | uint32_t(bits(nd(rng))) << 16;
        std::vector<float> st(size_t(128) * 64, 0.0f);
        cpu::dpbf16::qk(k.data(), size_t(d), nj, qp.data(), 64, cols, d, 0.5f, st.data(), 64);
        // The same product folding each column's max into colmax (a running max from earlier
        // chunks in even columns, none in odd ones): exactly the max of what it stored.
        const int cw = (cols + 15) / 16 * 16;
        std::vector<float> colmax(64), folded(64);
        for (int i = 0; i < 64; ++i) colmax[size_t(i)] = i % 2 ? -INFINITY : nd(rng);
        folded = colmax;
        const std::vector<float> st0 = st;
        cpu::dpbf16::qk(k.data(), size_t(d), nj, qp.data(), 64, cols, d, 0.5f, st.data(), 64,
                        folded.data());
        EXPECT_EQ(st, st0) << "qk with colmax " << what;
        for (int i = 0; i < 64; ++i) {
          float want = colmax[size_t(i)];
          for (int j = 0; j < nj && i < cw; ++j) want = std::max(want, st[size_t(j) * 64 + i]);
          ASSERT_EQ(folded[size_t(i)], want) << "colmax " << what << " column " << i;
        }
        double worst = 0;
        for (int j = 0; j < nj; ++j)
          for (int i = 0; i < cols; ++i) {
            double s = 0, mag = 0;
            for (int p = 0; p < d / 2; ++p)
              for (int h = 0; h < 2; ++h) {
                const double t = value(k[size_t(j) * d + 2 * p + h]) *
                                 value(uint16_t(qp[size_t(p) * 64 + i] >> (16 * h)));
                s += t;
                mag += std::abs(t);
              }
            worst = std::max(worst, std::abs(st[size_t(j) * 64 + i] - 0.5 * s) / (0.5 * mag));
          }
        EXPECT_LT(worst, d * 0x1p-24) << "qk " << what;

        // P^T in st (f32 [nj][64]), V^T [dv = d][ldvt] with NaN right after the chunk.
        const size_t ldvt = size_t(nj) + 33;
        std::vector<uint16_t> vt(size_t(d) * ldvt, bits(std::nanf("")));
        for (int e = 0; e < d; ++e)
          for (int j = 0; j < nj; ++j) vt[size_t(e) * ldvt + j] = bits(nd(rng));
        std::uniform_real_distribution<float> ud(0.0f, 1.0f);
        for (int j = 0; j < nj; ++j)
          for (int i = 0; i < 64; ++i) st[size_t(j) * 64 + i] = ud(rng);
        std::vector<float> ot(size_t(d) * 64), alpha(64);
        for (auto& x : ot) x = nd(rng);
        for (auto& x : alpha) x = ud(rng);
        const std::vector<float> o0 = ot;
        std::vector<uint32_t> pp(size_t(64 + 16) * 64);
        cpu::dpbf16::pv(st.data(), 64, nj, cols, vt.data(), ldvt, d, ot.data(), 64, alpha.data(),
                        false, pp.data(), 64);
        worst = 0;
        for (int e = 0; e < d; ++e)
          for (int i = 0; i < cols; ++i) {
            double s = double(alpha[i]) * o0[size_t(e) * 64 + i], mag = std::abs(s);
            for (int j = 0; j < nj; ++j) {
              const double t =
                  value(bits(st[size_t(j) * 64 + i])) * value(vt[size_t(e) * ldvt + j]);
              s += t;
              mag += std::abs(t);
            }
            const float got = ot[size_t(e) * 64 + i];
            ASSERT_TRUE(std::isfinite(got)) << "pv " << what;
            worst = std::max(worst, std::abs(got - s) / mag);
          }
        EXPECT_LT(worst, (nj + 2) * 0x1p-24) << "pv " << what;
      }
}
