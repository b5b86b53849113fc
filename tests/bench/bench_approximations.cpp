// attn_bench rows for the approximation families (compute/approximation.h): linear (elu+1),
// performer (64 features) and cosformer, their f32 routine on the cpu backend, causal, H=12, d=64,
// at N = 4K and 16K, beside cpu_dense/n:* of bench_attention.cpp. Claims they support: time grows
// <= 5x from 4K to 16K (dense grows ~16x), and >= 5x faster than dense at 16K. Also lsh and
// kmeans (selection + gather kernels) at the same sizes, whose time should grow about N log N.
// Registered before main() (bench_attention.cpp's main runs every registered case).
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/problem.h"
#include "compute/registry.h"

namespace {

using namespace attn;

const Problem& approx_problem(int n) {
  static std::map<int, std::unique_ptr<Problem>> cache;
  auto& slot = cache[n];
  if (!slot) slot = std::make_unique<Problem>(random_problem(12, 12, n, n, 64, true, 7 + n));
  return *slot;
}

// Times what executes the variant: an approximation's own routine (as cpu_dense times
// execute()), or for a selector run() (its selection is part of its cost).
void approx_case(benchmark::State& st, const std::string& spec, int n) {
  const Problem& p = approx_problem(n);
  const Variant v = make_variant(spec);
  auto backend = make_backend("cpu");
  Result r;
  for (auto _ : st) {
    if (v.approximation())
      r = v.approximation()->run(v, p, *backend, ApproxPath::Fast, RunOptions{});
    else
      r = run(v, p, *backend);
    benchmark::DoNotOptimize(r.o.data());
  }
  st.counters["n"] = n;
  st.counters["heads"] = p.n_heads;
  st.counters["d"] = p.d;
  st.counters["density"] = r.stats.density;
  st.counters["counted_flops"] = r.stats.counted.flops;
  st.counters["useful_flops"] = r.stats.counted.flops;
  st.counters["select_s"] = r.stats.select_seconds;
  st.SetLabel("cpu " + v.spec() + " causal H=12 d=64");
}

int register_approx_benchmarks() {
  const bool quick = std::getenv("ATTN_BENCH_QUICK") != nullptr;
  const char* reps_env = std::getenv("ATTN_BENCH_REPS");
  // The 4K cases take 30-170 ms: one repetition on a shared machine moved their 16K / 4K growth
  // by a third between runs, so even the quick bench takes the median of three.
  const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : (quick ? 3 : 5);
  const std::pair<const char*, const char*> cases[] = {
      {"linear", "linear(feature=elu1)"},
      {"performer", "performer(features=64)"},
      {"cosformer", "cosformer"},
      {"lsh", "lsh(buckets=16,rounds=2,chunk=64)"},
      {"kmeans", "kmeans(size=256,iters=4)"},
  };
  for (const auto& [name, spec] : cases)
    for (int n : {4096, 16384}) {
      const std::string s = spec;
      benchmark::RegisterBenchmark(
          ("approx_" + std::string(name) + "/n:" + std::to_string(n)).c_str(),
          [s, n](benchmark::State& st) { approx_case(st, s, n); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->Iterations(1)
          ->Repetitions(reps)
          ->ReportAggregatesOnly(true);
    }
  return 0;
}

const int registered = register_approx_benchmarks();

}  // namespace
