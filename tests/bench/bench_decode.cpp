// BM_DecodeStep: one decode step (one token) of a whole model over a KV cache of a fixed size,
// and BM_ReadBandwidth: a threaded read of a buffer as large as the weights and cache a step
// must read, the floor a memory-bound step cannot beat. Registered only when
// ATTN_DECODE_MODEL names a model folder: tests/bench/decode_vs_torch.py writes one (GPT-2 small
// shape, n_positions 2048, random weights) and compares the step with PyTorch's in the same run.
//   ATTN_DECODE_CACHE   entries the step attends over, its own included (default 2048)
//   ATTN_DECODE_POLICY  KV-cache policy (default kv_recent(window=<cache>): the cache stays at
//                       that size step after step)
//   ATTN_DECODE_STEPS   timed steps (default 32)
//   ATTN_DECODE_FLOOR_BYTES  weight + cache bytes: each step is paired with a read of that many
//                       bytes (counter over_paired_floor), and BM_ReadBandwidth is registered
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
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

// Seconds to read buf on `threads` threads (each its own contiguous part), summing floats.
double timed_read(const std::vector<float>& buf, int threads) {
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
  const double s = std::chrono::duration<double>(Clock::now() - t).count();
  benchmark::DoNotOptimize(partial.data());
  return s;
}

std::vector<float> read_buffer(double bytes) {
  std::vector<float> buf(static_cast<size_t>(bytes / sizeof(float)));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = float(i & 1023);  // touch every page
  return buf;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void BM_DecodeStep(benchmark::State& state, const std::string& dir) {
  auto model = attn::models::load_model(dir);
  const attn::models::ModelInfo& info = model->info();
  const int cache = env_int("ATTN_DECODE_CACHE", 2048), steps = env_int("ATTN_DECODE_STEPS", 32);
  const char* pol = std::getenv("ATTN_DECODE_POLICY");
  const std::string policy = pol && *pol ? pol : "kv_recent(window=" + std::to_string(cache) + ")";
  attn::models::KvCache kv(attn::make_kv_policy(policy));
  std::vector<int32_t> ids(static_cast<size_t>(cache - 1));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7919 + 13) % size_t(info.vocab));
  model->decode(ids, kv);  // prefill: the next step attends over `cache` entries
  // With ATTN_DECODE_FLOOR_BYTES each timed step comes with a read of that many bytes and a step
  // right after it, judged against it: a VM's bandwidth drifts between moments, so the floor is
  // measured next to the step it judges, and that step, like the read, finds nothing of the
  // weights in cache. The timed step (for the median) follows another step, as in generation.
  const char* fb = std::getenv("ATTN_DECODE_FLOOR_BYTES");
  const std::vector<float> floor_buf =
      fb && *fb ? read_buffer(std::atof(fb)) : std::vector<float>{};
  const int threads = attn::thread_count(0);
  std::vector<double> times, ratios;
  int32_t next = 1;
  double stepped = 0, bookkeeping = 0;
  const auto step = [&] {
    const double p0 = kv.policy_seconds;
    const auto t = Clock::now();
    const attn::models::ModelOutput out = model->decode({next}, kv);
    const double dt = std::chrono::duration<double>(Clock::now() - t).count();
    next = int32_t(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
    benchmark::DoNotOptimize(out.logits.data());
    stepped += dt;
    bookkeeping += kv.policy_seconds - p0;
    return dt;
  };
  for (auto _ : state) {
    for (int s = 0; s < steps; ++s) {
      if (!floor_buf.empty()) {
        const double read = timed_read(floor_buf, threads);
        ratios.push_back(step() / read);
      }
      times.push_back(step());
    }
  }
  state.counters["median_s"] = median(times);
  state.counters["min_s"] = *std::min_element(times.begin(), times.end());
  state.counters["policy_share"] = bookkeeping / stepped;
  // Median over steps of step time / the read just before it: the step against its floor.
  if (!ratios.empty()) state.counters["over_paired_floor"] = median(ratios);
  state.counters["cache_entries"] = double(kv.entries()) / double(info.n_layers * info.n_kv_heads);
  state.counters["cache_bytes"] = kv.bytes();
  state.counters["weight_bytes"] = weight_bytes(dir);
  state.counters["threads"] = double(threads);
}

// Reads `bytes` of memory on `threads` threads: the machine's read bandwidth, for the report.
void BM_ReadBandwidth(benchmark::State& state, double bytes) {
  const int threads = attn::thread_count(0);
  const std::vector<float> buf = read_buffer(bytes);
  std::vector<double> times;
  for (auto _ : state) times.push_back(timed_read(buf, threads));
  const double best = *std::min_element(times.begin(), times.end());
  state.counters["bytes"] = bytes;
  state.counters["min_s"] = best;
  state.counters["gb_per_s"] = bytes / best / 1e9;
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
