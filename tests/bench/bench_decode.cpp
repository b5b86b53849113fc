// BM_DecodeStep: one decode step (one token) of a whole model over a KV cache of a fixed size,
// and BM_ReadBandwidth: a threaded read of a buffer as large as the weights and cache a step
// must read, the floor a memory-bound step cannot beat. Registered only when
// ATTN_DECODE_MODEL names a model folder: tests/bench/decode_vs_torch.py writes one (GPT-2 small
// shape, n_positions 2048, random weights) and compares the step with PyTorch's in the same run.
//   ATTN_DECODE_CACHE   entries the step attends over, its own included (default 2048)
//   ATTN_DECODE_POLICY  KV-cache policy (default kv_recent(window=<cache>): the cache stays at
//                       that size step after step)
//   ATTN_DECODE_STEPS   timed steps (default 32)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "compute/kv/kv_policy.h"
#include "compute/parallel.h"
#include "models/arch/model.h"

namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::max(1, std::atoi(v)) : def;
}

// Bytes of every weight a step reads: the model's safetensors payload (all F32 here).
double weight_bytes(const std::string& dir) {
  std::FILE* f = std::fopen((dir + "/model.safetensors").c_str(), "rb");
  if (!f) return 0;
  std::fseek(f, 0, SEEK_END);
  const double b = double(std::ftell(f));
  std::fclose(f);
  return b;
}

void BM_DecodeStep(benchmark::State& state, const std::string& dir) {
  auto model = attn::load_model(dir);
  const attn::ModelInfo& info = model->info();
  const int cache = env_int("ATTN_DECODE_CACHE", 2048), steps = env_int("ATTN_DECODE_STEPS", 32);
  const char* pol = std::getenv("ATTN_DECODE_POLICY");
  const std::string policy = pol && *pol ? pol : "kv_recent(window=" + std::to_string(cache) + ")";
  attn::KvCache kv(attn::make_kv_policy(policy));
  std::vector<int32_t> ids(static_cast<size_t>(cache - 1));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7919 + 13) % size_t(info.vocab));
  model->decode(ids, kv);  // prefill: the next step attends over `cache` entries
  std::vector<double> times;
  int32_t next = 1;
  const double policy0 = kv.policy_seconds;
  for (auto _ : state) {
    for (int s = 0; s < steps; ++s) {
      const auto t = Clock::now();
      const attn::ModelOutput out = model->decode({next}, kv);
      times.push_back(std::chrono::duration<double>(Clock::now() - t).count());
      next = int32_t(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
      benchmark::DoNotOptimize(out.logits.data());
    }
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double total = std::accumulate(times.begin(), times.end(), 0.0);
  state.counters["median_s"] = sorted[sorted.size() / 2];
  state.counters["min_s"] = sorted.front();
  state.counters["policy_share"] = (kv.policy_seconds - policy0) / total;
  state.counters["cache_entries"] = double(kv.entries()) / double(info.n_layers * info.n_kv_heads);
  state.counters["cache_bytes"] = kv.bytes();
  state.counters["weight_bytes"] = weight_bytes(dir);
  state.counters["threads"] = double(attn::thread_count(0));
}

// Reads `bytes` of memory on `threads` threads (each its own contiguous part), summing floats.
void BM_ReadBandwidth(benchmark::State& state, double bytes) {
  const int threads = attn::thread_count(0);
  std::vector<float> buf(static_cast<size_t>(bytes / sizeof(float)));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(i & 1023);  // touch every page
  std::vector<double> times;
  for (auto _ : state) {
    std::vector<float> partial(static_cast<size_t>(threads) * 16, 0.0f);
    const auto t = Clock::now();
    std::vector<std::thread> pool;
    for (int k = 0; k < threads; ++k)
      pool.emplace_back([&, k] {
        const size_t n = buf.size(), b = n * k / threads, e = n * (k + 1) / threads;
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
        for (size_t i = b; i + 8 <= e; i += 8) {
          a0 += buf[i];
          a1 += buf[i + 1];
          a2 += buf[i + 2];
          a3 += buf[i + 3];
          a4 += buf[i + 4];
          a5 += buf[i + 5];
          a6 += buf[i + 6];
          a7 += buf[i + 7];
        }
        partial[size_t(k) * 16] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
      });
    for (auto& th : pool) th.join();
    times.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    benchmark::DoNotOptimize(partial.data());
  }
  std::sort(times.begin(), times.end());
  state.counters["bytes"] = bytes;
  state.counters["min_s"] = times.front();
  state.counters["gb_per_s"] = bytes / times.front() / 1e9;
  state.counters["threads"] = double(threads);
}

const int registered = [] {
  const char* dir = std::getenv("ATTN_DECODE_MODEL");
  if (!dir || !*dir) return 0;
  benchmark::RegisterBenchmark("BM_DecodeStep", BM_DecodeStep, std::string(dir))
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  // Weights plus a cache of ATTN_DECODE_CACHE entries of every layer's K and V at f32: read
  // from the model's config through a loaded model would double the memory; the Python driver
  // passes the total instead.
  if (const char* b = std::getenv("ATTN_DECODE_FLOOR_BYTES"))
    benchmark::RegisterBenchmark("BM_ReadBandwidth", BM_ReadBandwidth, std::atof(b))
        ->Iterations(10)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  return 1;
}();

}  // namespace
