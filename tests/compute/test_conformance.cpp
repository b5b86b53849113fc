// Conformance harness (the pattern of llama.cpp's test-backend-ops): every registered variant,
// on every fast backend, against the reference backend, over the same selected layout, on fresh
// random inputs. A case is a small printable value so a failure names the exact configuration.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/kv/kv_precision.h"
#include "compute/metrics.h"
#include "compute/precision.h"
#include "compute/reference/reference_backend.h"
#include "compute/registry.h"
#include "test_util.h"

using namespace attn;

namespace {

struct Case {
  std::string spec;
  bool causal;
  int n;
  int d;
  int heads, kv_heads;
};

std::string case_name(const Case& c) {
  std::ostringstream s;
  for (char ch : c.spec) s << (std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_');
  s << (c.causal ? "_causal" : "_bidir") << "_N" << c.n << "_d" << c.d << "_H" << c.heads << "_"
    << c.kv_heads;
  return s.str();
}

// gtest prints parameters with this instead of a byte dump.
void PrintTo(const Case& c, std::ostream* os) {
  *os << case_name(c);
}

// Every pattern piece with its defaults, smaller settings so small N is sparse too, and each
// score modifier / normaliser alone and composed with sparse patterns.
std::vector<std::string> specs() {
  std::vector<std::string> out;
  for (const PieceInfo& piece : registry_pieces())
    if (piece.kind == PieceKind::Pattern || piece.kind == PieceKind::Dense ||
        piece.kind == PieceKind::Selective)
      out.push_back(piece.info.id);
  for (const PieceInfo& piece : registry_pieces())
    if (piece.kind == PieceKind::ScoreMod || piece.kind == PieceKind::Normaliser)
      out.push_back("dense+" + piece.info.id);
  for (const char* s :
       {"window(size=16)", "sinks_window(sinks=2,window=16)", "block_topk(block=16,k=2)",
        "topk(k=8)", "window(size=16)+sigmoid", "block_topk(block=16,k=2)+entmax15",
        "topk(k=8)+relu2", "sinks_window(sinks=2,window=16)+alibi+softcap(cap=5)",
        "window(size=16)+softplus+temperature(t=0.5)",
        // per-query key lists (the gather kernel) under modifiers and the
        // elementwise normalisers
        "topk(k=8)+alibi+softcap(cap=5)", "h2o(heavy=8,recent=8)+softplus", "topk(k=8)+sigmoid"})
    out.push_back(s);
  return out;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  std::vector<int> ns = {1, 7, 77, 1000};
  if (!test::quick()) ns.push_back(4097);
  for (const std::string& spec : specs())
    for (bool causal : {true, false})
      for (int n : ns)
        for (int d : {32, 64, 128}) {
          // The largest size runs one head (the reference is slow by design); smaller ones
          // exercise multi-head and grouped-query layouts.
          int heads = n >= 4097 ? 1 : (n >= 1000 ? 2 : 4);
          int kv = heads >= 4 ? 2 : heads;
          if (n >= 4097 && d != 64 && spec.find('+') != std::string::npos) continue;
          out.push_back({spec, causal, n, d, heads, kv});
        }
  return out;
}

class Conformance : public ::testing::TestWithParam<Case> {};

TEST_P(Conformance, CpuMatchesReference) {
  const Case& c = GetParam();
  Variant v = make_variant(c.spec);
  uint64_t seed = std::hash<std::string>{}(case_name(c));
  Problem p = random_problem(c.heads, c.kv_heads, c.n, c.n, c.d, c.causal, seed);
  auto reference = make_reference_backend();
  auto cpu = make_backend("cpu");
  Result fast;
  try {
    fast = run(v, p, *cpu);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Unsupported) GTEST_SKIP() << e.what();
    throw;
  }
  EXPECT_EQ(fast.stats.backend, "cpu");
  // Same kept set for both: the reference executes the layout the cpu run selected.
  Result ref = reference->execute(v, p, fast.layout, {});
  for (float x : fast.o) ASSERT_TRUE(std::isfinite(x)) << "non-finite output";
  double err = relative_error(fast.o, ref.o);
  double norm = 0;
  for (float x : ref.o) norm += double(x) * x;
  if (norm > 0) {
    EXPECT_LT(err, 1e-5) << case_name(c);
  } else {
    for (float x : fast.o) ASSERT_EQ(x, 0.0f);
  }
  // Row statistics drive every recomputed probability (tile query, metrics): they must agree.
  double stat_err = 0;
  for (size_t i = 0; i < ref.row_stat.size(); ++i)
    stat_err = std::max(stat_err, double(std::abs(fast.row_stat[i] - ref.row_stat[i])) /
                                      (1.0 + std::abs(ref.row_stat[i])));
  // Selective logits carry the sum of thousands of earlier scores (magnitude ~1e3), so their f32
  // rounding alone is ~1e-4 absolute; the outputs above still match to 1e-5.
  EXPECT_LT(stat_err, v.selective() ? 1e-4 : 1e-5) << case_name(c);
  EXPECT_GT(fast.stats.counted.flops, 0);
  EXPECT_GE(fast.stats.density, 0.0);
  EXPECT_LE(fast.stats.density, 1.0 + 1e-12);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Conformance, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return case_name(info.param);
                         });

// The same harness with Q, K and V stored in bf16 and f16 (RunOptions::precision), against the
// reference on the rounded inputs: f32 arithmetic alone may differ, except that AMX tiles (bf16)
// also round the probabilities, which half of bf16's unit roundoff bounds. A changed rounding of
// the inputs differs by about one unit roundoff and fails either bound.
std::vector<Case> precision_cases() {
  std::vector<Case> out;
  for (const std::string& spec : specs())
    for (bool causal : {true, false})
      for (int n : {77, 1000}) out.push_back({spec, causal, n, 64, n >= 1000 ? 2 : 4, 2});
  return out;
}

class ConformancePrecision : public ::testing::TestWithParam<Case> {};

TEST_P(ConformancePrecision, CpuMatchesReferenceOnTheStoredValues) {
  const Case& c = GetParam();
  const Variant v = make_variant(c.spec);
  const uint64_t seed = std::hash<std::string>{}(case_name(c));
  const Problem p = random_problem(c.heads, c.kv_heads, c.n, c.n, c.d, c.causal, seed);
  auto reference = make_reference_backend();
  auto cpu = make_backend("cpu");
  for (Precision prec : {Precision::Bf16, Precision::F16}) {
    RunOptions opt;
    opt.precision = prec;
    Result fast;
    try {
      fast = run(v, p, *cpu, opt);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Unsupported) GTEST_SKIP() << e.what();
      throw;
    }
    Problem stored = p;
    for (AlignedFloats* x : {&stored.q, &stored.k, &stored.v})
      for (float& y : *x) y = prec == Precision::Bf16 ? round_bf16(y) : round_fp16(y);
    const Result ref = reference->execute(v, stored, fast.layout, {});
    for (float x : fast.o) ASSERT_TRUE(std::isfinite(x)) << precision_name(prec);
    if (v.approximation()) continue;  // approximations compute their own way (f32 only)
    EXPECT_EQ(fast.stats.precision, prec);
    double norm = 0;
    for (float x : ref.o) norm += double(x) * x;
    if (norm == 0) continue;
    const double tol =
        prec == Precision::Bf16 ? 0.5 * unit_roundoff(prec) : (v.selective() ? 1e-4 : 2e-5);
    EXPECT_LT(relative_error(fast.o, ref.o), tol) << case_name(c) << " " << precision_name(prec);
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ConformancePrecision, ::testing::ValuesIn(precision_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return case_name(info.param);
                         });

}  // namespace
