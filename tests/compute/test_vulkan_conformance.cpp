// Conformance of the Vulkan backend: every registered variant (the case list of
// test_conformance.cpp) on `vulkan` against the double-precision reference over the layout the
// Vulkan run selected, on fresh random inputs, for N in {1, 77, 1000, 4097, 8192}, d in
// {32, 64, 128}, causal and bidirectional; tolerance 1e-4 relative (fp32 kernels).
//
// The reference costs O(n_q * n_k * d) in double, so at N >= 4097 a case has one head and its
// queries are the LAST 256 (N = 4097) or 64 (N = 8192) tokens against all N keys (n_q < n_k:
// the queries that see the most keys, which is what stresses the kernels and lavapipe's loop
// limit); at N = 1000, 2 heads; smaller N, 4 query heads sharing 2 kv heads (GQA). Variants
// composed with '+' run at N >= 4097 with d = 64 only, as in test_conformance.cpp.
// ATTN_TEST_QUICK=1 (sanitizer builds) keeps d = 64 only at N >= 4097 and the last 64 queries
// at N >= 1000.
// Selective attention has no Vulkan kernel: its cases check that the fallback runs it on the
// CPU instead. One test per N (per d at N = 1000) keeps each ctest entry to one process and
// one device.
#ifdef ATTN_HAVE_VULKAN
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "compute/backend.h"
#include "compute/error.h"
#include "compute/fallback.h"
#include "compute/metrics.h"
#include "compute/reference/reference_backend.h"
#include "compute/registry.h"
#include "test_util.h"
#include "test_vulkan_util.h"

using namespace attn;

namespace {

struct Case {
  std::string spec;
  bool causal;
  int n, n_q, d, heads, kv_heads;
};

std::string case_name(const Case& c) {
  std::ostringstream s;
  s << c.spec << (c.causal ? " causal" : " bidir") << " N=" << c.n << " n_q=" << c.n_q
    << " d=" << c.d << " H=" << c.heads << "/" << c.kv_heads;
  return s.str();
}

// The specs of test_conformance.cpp: every pattern, dense and selective piece with defaults,
// every modifier and normaliser on dense, and smaller or composed settings.
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
        "window(size=16)+softplus+temperature(t=0.5)"})
    out.push_back(s);
  return out;
}

std::vector<Case> cases(int n, int only_d) {
  std::vector<Case> out;
  for (const std::string& spec : specs())
    for (bool causal : {true, false})
      for (int d : {32, 64, 128}) {
        if (only_d && d != only_d) continue;
        if (n >= 4097 && d != 64 && spec.find('+') != std::string::npos) continue;
        if (test::quick() && n >= 4097 && d != 64) continue;  // sanitizer builds: d = 64 only
        int heads = n >= 4097 ? 1 : (n >= 1000 ? 2 : 4);
        int kv = heads >= 4 ? 2 : heads;
        int n_q = n >= 8192 ? 64 : (n >= 4097 ? 256 : n);
        if (test::quick() && n >= 1000) n_q = 64;  // sanitizer builds: the last 64 queries
        out.push_back({spec, causal, n, n_q, d, heads, kv});
      }
  return out;
}

struct Worst {
  double err = 0, stat = 0;
  std::string err_case, stat_case;
};

class VulkanConformance : public test::VulkanTest {
 protected:
  void run_all(int n, int only_d = 0) {
    auto gpu = make_backend("vulkan");
    auto reference = make_reference_backend();
    Worst worst;
    int ran = 0, fell_back = 0;
    for (const Case& c : cases(n, only_d)) {
      const std::string name = case_name(c);
      SCOPED_TRACE(name);
      Variant v = make_variant(c.spec);
      Problem p = random_problem(c.heads, c.kv_heads, c.n_q, c.n, c.d, c.causal,
                                 std::hash<std::string>{}(name));
      std::string why;
      if (!gpu->supports(v, p, &why)) {
        // Only selective attention lacks a kernel; it must run on the CPU instead.
        EXPECT_TRUE(v.selective()) << "vulkan refused: " << why;
        std::string note;
        Result r = run_falling_back(make_backend("vulkan"), v, p, &note);
        EXPECT_EQ(r.stats.backend, "cpu");
        EXPECT_FALSE(note.empty());
        ++fell_back;
        continue;
      }
      Result fast = run(v, p, *gpu);
      EXPECT_EQ(fast.stats.backend, "vulkan");
      Result ref = reference->execute(v, p, fast.layout, {});
      for (float x : fast.o) ASSERT_TRUE(std::isfinite(x)) << "non-finite output";
      double norm = 0;
      for (float x : ref.o) norm += double(x) * x;
      double err = 0;
      if (norm > 0) {
        err = relative_error(fast.o, ref.o);
        EXPECT_LT(err, 1e-4);
      } else {
        for (float x : fast.o) ASSERT_EQ(x, 0.0f);
      }
      double stat = 0;
      for (size_t i = 0; i < ref.row_stat.size(); ++i)
        stat = std::max(stat, double(std::abs(fast.row_stat[i] - ref.row_stat[i])) /
                                  (1.0 + std::abs(ref.row_stat[i])));
      EXPECT_LT(stat, 1e-4);
      EXPECT_GT(fast.stats.counted.flops, 0);
      EXPECT_GT(fast.stats.kernel_seconds, 0);
      EXPECT_LE(fast.stats.density, 1.0 + 1e-12);
      if (err > worst.err) worst = {err, worst.stat, name, worst.stat_case};
      if (stat > worst.stat) {
        worst.stat = stat;
        worst.stat_case = name;
      }
      ++ran;
    }
    std::printf(
        "vulkan conformance N=%d d=%s: %d cases on vulkan, %d fell back to cpu; max rel err "
        "%.3g (%s), max row-stat err %.3g (%s)\n",
        n, only_d ? std::to_string(only_d).c_str() : "all", ran, fell_back, worst.err,
        worst.err_case.c_str(), worst.stat, worst.stat_case.c_str());
    RecordProperty("max_rel_err", std::to_string(worst.err));
    RecordProperty("max_stat_err", std::to_string(worst.stat));
  }
};

TEST_F(VulkanConformance, N1) {
  run_all(1);
}
TEST_F(VulkanConformance, N77) {
  run_all(77);
}
// N = 1000 is the costliest set (full rows, two heads): one test per d, run in parallel by ctest.
TEST_F(VulkanConformance, N1000_d32) {
  run_all(1000, 32);
}
TEST_F(VulkanConformance, N1000_d64) {
  run_all(1000, 64);
}
TEST_F(VulkanConformance, N1000_d128) {
  run_all(1000, 128);
}
TEST_F(VulkanConformance, N4097) {
  run_all(4097);
}
TEST_F(VulkanConformance, N8192) {
  run_all(8192);
}

}  // namespace
#endif  // ATTN_HAVE_VULKAN
