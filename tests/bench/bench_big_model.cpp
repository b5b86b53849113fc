// Reduced-precision weights, measured:
//  - BM_WeightGemm/{f32,bf16,f16}: one layer-sized GEMM (512 tokens x 4096 x 4096, nn.Linear
//    layout) with the weights in each storage type, on the path cpu::sgemm picks here
//    (counter "gflops"; "path" 0 eigen, 1 avx512, 2 amx, 3 dpbf16). tests/bench/big_model.py takes
//    the bf16 / f32 ratio.
//  - BM_BigModelDecode: registered when ATTN_BIG_MODEL names a BF16 checkpoint folder
//    (tests/bench/make_big_checkpoint.py: Llama-3-8B's shapes). Loads it as stored, prefills
//    ATTN_BIG_PREFILL tokens (default 512) and times single-token decode steps against one pass
//    that reads every byte a step must read: all weights but the embedding table (a step reads
//    one row of it), at the bandwidth measured on the memory map, plus the cache's bytes. Each
//    step follows its own read, and the ratio is the median of the pairs' ratios: this machine's
//    memory bandwidth drifts by a third over seconds, which moves both sides of a pair alike.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu/gemm.h"
#include "compute/parallel.h"
#include "models/arch/kv_cache.h"
#include "models/arch/model.h"
#include "models/formats/safetensors.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

void BM_WeightGemm(benchmark::State& state) {
  using attn::cpu::ElemType;
  const auto type = ElemType(state.range(0));
  const int m = 512, n = 4096, k = 4096;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(size_t(m) * k), bf(size_t(n) * k), c(size_t(m) * n);
  for (float& x : a) x = u(rng);
  for (float& x : bf) x = u(rng);
  std::vector<uint16_t> b16(bf.size());
  for (size_t i = 0; i < bf.size(); ++i)
    b16[i] = type == ElemType::F16 ? uint16_t(_cvtss_sh(bf[i], _MM_FROUND_TO_NEAREST_INT))
                                   : attn::cpu::bf16_bits(bf[i]);
  attn::cpu::GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a.data();
  g.lda = k;
  g.b = type == ElemType::F32 ? static_cast<const void*>(bf.data()) : b16.data();
  g.b_type = type;
  g.ldb = k;
  g.b_nk = true;
  g.c = c.data();
  g.ldc = n;
  if (!attn::cpu::sgemm(g, 0)) {
    state.SkipWithError("no AVX-512 here: f32 layers use Eigen, not timed by this row");
    return;
  }
  for (auto _ : state) {
    attn::cpu::sgemm(g, 0);
    benchmark::DoNotOptimize(c.data());
  }
  const std::string path = attn::cpu::gemm_path(type);
  state.counters["gflops"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["path"] = path == "dpbf16" ? 3 : path == "amx" ? 2 : path == "avx512" ? 1 : 0;
  state.SetLabel(std::string(attn::cpu::elem_type_name(type)) + " " + path);
}
BENCHMARK(BM_WeightGemm)
    ->Arg(int(attn::cpu::ElemType::F32))
    ->Arg(int(attn::cpu::ElemType::Bf16))
    ->Arg(int(attn::cpu::ElemType::F16))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

// Reads every byte of `spans` once on all threads (XOR of 32-byte words), in 4 MiB slices so
// the threads share the work evenly; returns seconds.
double read_once(const std::vector<std::pair<const uint8_t*, size_t>>& spans) {
  constexpr size_t kSlice = size_t(4) << 20;
  std::vector<std::pair<const uint8_t*, size_t>> slices;
  for (const auto& [p, n] : spans)
    for (size_t o = 0; o < n; o += kSlice) slices.push_back({p + o, std::min(kSlice, n - o)});
  std::atomic<uint64_t> sink{0};
  const auto t0 = clock_type::now();
  attn::parallel_for(int(slices.size()), [&](int i) {
    const uint8_t* p = slices[size_t(i)].first;
    const size_t n = slices[size_t(i)].second / 64 * 64;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (size_t o = 0; o < n; o += 64) {
      a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + o)));
      a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + o + 32)));
    }
    sink += uint64_t(_mm256_extract_epi64(_mm256_xor_si256(a0, a1), 0));
  });
  benchmark::DoNotOptimize(sink.load());
  return seconds_since(t0);
}

void BM_BigModelDecode(benchmark::State& state, const std::string& dir) {
  const char* pf = std::getenv("ATTN_BIG_PREFILL");
  const int prefill = pf ? std::max(1, std::atoi(pf)) : 512;
  auto t0 = clock_type::now();
  auto model = attn::models::load_model(dir);
  const double load_s = seconds_since(t0);
  // What a step reads: every tensor but the token embeddings (one row of them).
  const auto ckpt = attn::models::SafetensorsCheckpoint::open(dir);
  std::vector<std::pair<const uint8_t*, size_t>> spans;
  size_t weight_bytes = 0;
  for (const std::string& name : ckpt.names()) {
    if (name.find("embed_tokens") != std::string::npos) continue;
    const attn::models::TensorView& t = ckpt.tensor(name);
    spans.push_back({static_cast<const uint8_t*>(t.data), t.nbytes});
    weight_bytes += t.nbytes;
  }
  read_once(spans);  // faults the pages in (a step finds them resident too)

  const int vocab = model->info().vocab;
  std::vector<int32_t> ids(static_cast<size_t>(prefill));
  for (int i = 0; i < prefill; ++i) ids[size_t(i)] = int32_t((int64_t(i) * 7919 + 11) % vocab);
  attn::models::KvCache cache;
  t0 = clock_type::now();
  model->decode(ids, cache);
  const double prefill_s = seconds_since(t0);
  std::vector<double> steps, reads, ratios;
  for (auto _ : state) {
    state.PauseTiming();
    const double read_s = read_once(spans);
    state.ResumeTiming();
    t0 = clock_type::now();
    const double cache_bytes = cache.bytes();  // what this step reads of the cache
    const attn::models::ModelOutput out = model->decode({int32_t(steps.size() % 97 + 5)}, cache);
    benchmark::DoNotOptimize(out.logits.data());
    steps.push_back(seconds_since(t0));
    reads.push_back(read_s);
    ratios.push_back(steps.back() /
                     (read_s * (double(weight_bytes) + cache_bytes) / double(weight_bytes)));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double cache_bytes = cache.bytes();
  const double bandwidth = double(weight_bytes) / median(reads);
  const double read_s = (double(weight_bytes) + cache_bytes) / bandwidth;
  const double step_s = median(steps);
  state.counters["load_s"] = load_s;
  state.counters["prefill_s"] = prefill_s;
  state.counters["prefill_tokens"] = prefill;
  state.counters["step_s"] = step_s;
  state.counters["step_min_s"] = *std::min_element(steps.begin(), steps.end());
  state.counters["weight_gib"] = double(weight_bytes) / (1 << 30);
  state.counters["cache_mib"] = cache_bytes / (1 << 20);
  state.counters["read_gbs"] = bandwidth / 1e9;
  state.counters["read_s"] = read_s;
  state.counters["step_over_read"] = median(ratios);  // per pair, then the median
  state.counters["step_over_read_min"] = *std::min_element(ratios.begin(), ratios.end());
  state.counters["step_over_read_max"] = *std::max_element(ratios.begin(), ratios.end());
}

const int registered = [] {
  const char* dir = std::getenv("ATTN_BIG_MODEL");
  if (!dir || !*dir) return 0;
  benchmark::RegisterBenchmark("BM_BigModelDecode", BM_BigModelDecode, std::string(dir))
      ->Iterations(7)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  return 1;
}();

}  // namespace
