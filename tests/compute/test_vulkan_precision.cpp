// The Vulkan kernels with Q, K and V stored in 16 bits (RunOptions::precision = bf16 | f16):
// dense, block, key-list and line layouts against the f64 reference on the rounded inputs (only
// f32 arithmetic may differ, so a changed rounding fails) and on the given ones (within the
// format's unit roundoff), results naming their precision.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "compute/kv/kv_precision.h"
#include "compute/metrics.h"
#include "compute/precision.h"
#include "compute/reference/reference_backend.h"
#include "compute/registry.h"
#include "test_util.h"
#include "test_vulkan_util.h"

#ifdef ATTN_HAVE_VULKAN

using namespace attn;

namespace {

Problem rounded(Problem p, Precision prec) {
  for (AlignedFloats* x : {&p.q, &p.k, &p.v})
    for (float& v : *x) v = prec == Precision::Bf16 ? round_bf16(v) : round_fp16(v);
  return p;
}

Layout blocks(const Problem& p) {
  BlockLayout b;
  b.bq = b.bk = 32;
  b.n_qb = (p.n_q + 31) / 32;
  b.n_kb = (p.n_k + 31) / 32;
  b.row_ptr.push_back(0);
  std::mt19937 rng(3);
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

Layout lists(const Problem& p) {
  IndexLayout x;
  x.row_ptr.push_back(0);
  std::mt19937 rng(4);
  for (int i = 0; i < p.n_q; ++i) {
    for (int j = 0; j <= p.qpos(i); ++j)
      if (j == p.qpos(i) || rng() % 5 == 0) x.col.push_back(j);
    x.row_ptr.push_back(int64_t(x.col.size()));
  }
  Layout l;
  l.kind = Layout::Kind::Indices;
  l.indices = {x};
  return l;
}

Layout lines(const Problem& p) {
  LineLayout x;
  for (int j = 2; j < p.n_k; j += 29) x.columns.push_back(j);
  for (int64_t o : {100, 33, 4, 0}) x.offsets.push_back(o);
  Layout l;
  l.kind = Layout::Kind::Lines;
  l.lines = {x};
  return l;
}

class VulkanPrecision : public test::VulkanTest {};

}  // namespace

TEST_F(VulkanPrecision, EachKernelAgainstTheF64Reference) {
  auto vulkan = make_backend("vulkan");
  auto reference = make_reference_backend();
  for (int d : {64, 40}) {
    const Problem p = random_problem(2, 1, 150, 150, d, true, 31 + d);
    const Variant v = make_variant("dense");
    const std::vector<std::pair<std::string, Layout>> cases = {
        {"dense", Layout{}}, {"blocks", blocks(p)}, {"key lists", lists(p)}, {"lines", lines(p)}};
    for (const auto& [name, layout] : cases) {
      const Result exact = reference->execute(v, p, layout, {});
      for (Precision prec : {Precision::Bf16, Precision::F16}) {
        const std::string what = name + " " + precision_name(prec) + " d=" + std::to_string(d);
        RunOptions opt;
        opt.precision = prec;
        const Result r = vulkan->execute(v, p, layout, opt);
        EXPECT_EQ(r.stats.backend, "vulkan");
        EXPECT_EQ(r.stats.precision, prec) << what;
        const Result on_rounded = reference->execute(v, rounded(p, prec), layout, {});
        const double u = unit_roundoff(prec);
        EXPECT_LT(relative_error(r.o, on_rounded.o), 2e-5) << what << " (rounded inputs)";
        EXPECT_LT(relative_error(r.o, exact.o), u) << what << " (given inputs)";
        EXPECT_GT(relative_error(r.o, exact.o), 0.05 * u) << what << ": rounding happened";
      }
    }
  }
}

TEST_F(VulkanPrecision, F16BeyondItsRangeIsAClearError) {
  Problem p = random_problem(1, 1, 20, 20, 32, true, 3);
  p.v[5] = 1e6f;
  auto vulkan = make_backend("vulkan");
  RunOptions opt;
  opt.precision = Precision::F16;
  const std::string msg =
      test::error_of([&] { vulkan->execute(make_variant("dense"), p, Layout{}, opt); },
                     ErrorCode::InvalidArgument);
  EXPECT_TRUE(test::contains(msg, "65504")) << msg;
}

#endif
