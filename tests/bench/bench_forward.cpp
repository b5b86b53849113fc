// BM_Forward: one forward pass of a whole model with every attention pattern captured
// (blocks.*.attn.pattern), timed per pass. Registered only when ATTN_FORWARD_MODEL names a model
// folder holding ids.npy (i32 [N]): tests/bench/forward_vs_torch.py writes one (GPT-2 small
// shape, random weights), runs this beside PyTorch on the same weights, and compares outputs
// through the logits and last pattern written back here (attnscope_logits.npy,
// attnscope_pattern_last.npy).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "compute/parallel.h"
#include "models/arch/model.h"
#include "models/formats/npy.h"

namespace {

// CPU seconds of the whole process (every thread), user + system.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void BM_Forward(benchmark::State& state, const std::string& dir) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto model = attn::models::load_model(dir);
  const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
  attn::models::ModelInput in;
  for (float v : attn::models::read_npy(dir + "/ids.npy").to_f32()) in.ids.push_back(int32_t(v));
  const char* hooks = std::getenv("ATTN_FORWARD_HOOKS");
  attn::models::Capture cap(
      attn::models::HookSelection::parse(hooks ? hooks : "blocks.*.attn.pattern"));
  attn::models::ForwardOptions opt;
  opt.capture = &cap;
  std::vector<double> times, cpu;
  attn::models::ModelOutput out;
  for (auto _ : state) {
    const auto t = clock::now();
    const double c = process_cpu_seconds();
    out = model->forward(in, opt);
    benchmark::DoNotOptimize(out.logits.data());
    times.push_back(std::chrono::duration<double>(clock::now() - t).count());
    cpu.push_back(process_cpu_seconds() - c);
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu.begin(), cpu.end());
  state.counters["cpu_min_s"] = cpu.front();
  state.counters["cpu_median_s"] = cpu[cpu.size() / 2];
  state.counters["tokens"] = double(in.ids.size());
  state.counters["load_s"] = load_s;
  state.counters["min_s"] = times.front();
  state.counters["median_s"] = times[times.size() / 2];
  state.counters["threads"] = double(attn::thread_count(0));
  const int n = out.n_tokens, last = model->info().n_layers - 1;
  attn::models::write_npy(dir + "/attnscope_logits.npy",
                          attn::models::NpyArray::from_f32({n, out.n_logits}, out.logits));
  const auto& pat = cap.layers[size_t(last)].pattern;
  if (!pat.empty()) {
    attn::models::write_npy(dir + "/attnscope_pattern_last.npy",
                            attn::models::NpyArray::from_f32({model->info().n_heads, n, n}, pat));
  }
}

const int registered = [] {
  const char* dir = std::getenv("ATTN_FORWARD_MODEL");
  if (!dir || !*dir) return 0;
  const char* iters = std::getenv("ATTN_FORWARD_ITERS");
  benchmark::RegisterBenchmark("BM_Forward", BM_Forward, std::string(dir))
      ->Iterations(iters ? std::max(1, std::atoi(iters)) : 3)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  return 1;
}();

}  // namespace
