// Vulkan rows of attn_bench (BM_Vulkan*): the vulkan backend's execute() on the shapes of the cpu
// rows (H=12, d=64, causal), dense, block-sparse, window and top-k, the GPU tile query, and
// the top-k / block top-k selection on the GPU beside the CPU selectors (same process).
// Time is the GPU timestamp time of the kernels (manual time); `wall_seconds` adds uploads and
// read-back. On lavapipe (a CPU device) the rows measure CPU speed, not a GPU: their labels say
// so and only the small sizes run. BM_VulkanGpu* (N = 4096/16384/65536 or GPU_BENCH_SIZES, 32
// heads, d = 128) run only with ATTN_BENCH_GPU=1 (tests/bench/gpu.sh), and not on a CPU device
// unless GPU_BENCH_ALLOW_CPU=1.
#ifdef ATTN_HAVE_VULKAN
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compute/backend.h"
#include "compute/layout.h"
#include "compute/probabilities.h"
#include "compute/registry.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/device_select.h"
#include "compute/vulkan/tile_query.h"
#include "compute/vulkan/vulkan_backend.h"

namespace {

using namespace attn;

// Uniform values of unit variance from a counter hash, filled on all cores: the 65536-token GPU
// shapes need 3 GiB of inputs, too many for std::normal_distribution in a benchmark.
void fill(AlignedFloats& x, uint64_t seed) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  const size_t per = (x.size() + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t * per; i < std::min(x.size(), (t + 1) * per); ++i) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x[i] = float((double(z >> 11) / 9007199254740992.0) * 3.4641016 - 1.7320508);
      }
    });
  for (auto& th : pool) th.join();
}

const Problem& problem(int heads, int n, int d) {
  static std::map<std::tuple<int, int, int>, std::unique_ptr<Problem>> cache;
  auto& slot = cache[{heads, n, d}];
  if (!slot) {
    slot = std::make_unique<Problem>();
    Problem& p = *slot;
    p.n_heads = p.n_kv_heads = heads;
    p.n_q = p.n_k = n;
    p.d = d;
    p.causal = true;
    for (auto* t : {&p.q, &p.k, &p.v}) t->resize(size_t(heads) * n * d);
    fill(p.q, 1);
    fill(p.k, 2);
    fill(p.v, 3);
  }
  return *slot;
}

// round(fraction x causal 64x64 blocks): the diagonal and uniformly drawn blocks below it.
Layout block_layout(int n, double fraction) {
  const int bs = 64, nb = (n + bs - 1) / bs;
  std::vector<std::pair<int, int>> below;
  for (int r = 0; r < nb; ++r)
    for (int c = 0; c < r; ++c) below.push_back({r, c});
  std::mt19937_64 rng(99);
  std::shuffle(below.begin(), below.end(), rng);
  const int64_t want = std::max<int64_t>(nb, std::llround(fraction * nb * (nb + 1) / 2.0));
  below.resize(size_t(want - nb));
  for (int r = 0; r < nb; ++r) below.push_back({r, r});
  std::sort(below.begin(), below.end());
  BlockLayout b;
  b.bq = b.bk = bs;
  b.n_qb = b.n_kb = nb;
  b.row_ptr.assign(size_t(nb) + 1, 0);
  for (auto [r, c] : below) {
    b.col.push_back(c);
    b.full.push_back(1);
    ++b.row_ptr[size_t(r) + 1];
  }
  for (int r = 0; r < nb; ++r) b.row_ptr[size_t(r) + 1] += b.row_ptr[size_t(r)];
  Layout l;
  l.kind = Layout::Kind::Blocks;
  l.blocks = {std::move(b)};
  return l;
}

std::string device_label() {
  std::string why;
  auto ctx = vk::shared_context(&why);
  if (!ctx) return "no Vulkan device";
  std::string s = "vulkan " + ctx->device_name();
  if (ctx->is_cpu()) s += " [lavapipe: CPU speed, not a GPU measurement]";
  return s;
}

// Times execute() of `spec` over `layout` (selected once beforehand when null).
void attention_case(benchmark::State& st, int heads, int n, int d, const std::string& spec,
                    const Layout* given, const std::string& what) {
  auto backend = make_backend("vulkan");
  const Problem& p = problem(heads, n, d);
  const Variant v = make_variant(spec);
  std::string why;
  if (!backend->supports(v, p, &why)) {
    st.SkipWithError(("vulkan cannot run this: " + why).c_str());
    return;
  }
  const Layout layout = given ? *given : v.select(p);
  int64_t kept = 0;
  for (int h = 0; h < p.n_heads; ++h) kept += layout_kept_entries(layout, p, h);
  double counted = 0, wall = 0;
  for (auto _ : st) {
    auto t0 = std::chrono::steady_clock::now();
    Result r = backend->execute(v, p, layout, {});
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.SetIterationTime(r.stats.kernel_seconds);
    counted = r.stats.counted.flops;
    benchmark::DoNotOptimize(r.o.data());
  }
  st.counters["n"] = n;
  st.counters["heads"] = heads;
  st.counters["d"] = d;
  st.counters["density"] = double(kept) / (double(visible_entries(p)) * p.n_heads);
  st.counters["useful_flops"] = 4.0 * d * double(kept);
  st.counters["counted_flops"] = counted;
  st.counters["wall_seconds"] = wall;
  st.SetLabel(what + " | " + device_label());
}

// Times building the layout of a dynamic selector: on the GPU through the vulkan backend's
// select() (GPU timestamps of the score and select dispatches; `wall_seconds` adds uploads and
// the read-back of the kept lists), or by the CPU selector in this process (wall time).
void select_case(benchmark::State& st, int heads, int n, int d, const std::string& spec,
                 bool on_gpu, const std::string& what) {
  auto backend = make_backend("vulkan");
  const Problem& p = problem(heads, n, d);
  const Variant v = make_variant(spec);
  double flops = 0, wall = 0;
  for (auto _ : st) {
    SelectStats s;
    Layout l;
    auto t0 = std::chrono::steady_clock::now();
    if (on_gpu) {
      if (!backend->select(v, p, &l, &s)) {
        st.SkipWithError("the vulkan backend does not select this on the GPU");
        return;
      }
    } else {
      l = v.select(p, &s);
    }
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.SetIterationTime(on_gpu ? s.seconds : wall);
    flops = s.flops;
    benchmark::DoNotOptimize(l.indices.data());
  }
  st.counters["n"] = n;
  st.counters["heads"] = heads;
  st.counters["d"] = d;
  st.counters["density"] = 1.0;
  st.counters["useful_flops"] = flops;  // the selector's scoring work
  st.counters["wall_seconds"] = wall;
  st.SetLabel(what + " | " +
              (on_gpu ? device_label() : std::string("CPU selector, same process, 1 thread")));
}

void tile_case(benchmark::State& st, int n, int cells) {
  std::string why;
  auto ctx = vk::shared_context(&why);
  if (!ctx) {
    st.SkipWithError(why.c_str());
    return;
  }
  const Problem& p = problem(12, n, 64);
  const Variant v = make_variant("dense");
  Result r = run(v, p, *make_vulkan_backend(ctx));
  vk::TileImage image(ctx);
  for (auto _ : st) {
    double s = vk::tile_probabilities_to_image(*ctx, v, p, r,
                                               {0, 0, n, 0, n, cells, cells, Pool::Max}, image);
    st.SetIterationTime(s);
  }
  st.counters["n"] = n;
  st.counters["cells"] = cells;
  st.counters["entries"] = double(n) * (n + 1) / 2;  // causal entries the tile pools
  st.SetLabel("tile query " + std::to_string(cells) + "^2 cells, max pool | " + device_label());
}

void add(const std::string& name, int reps, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), fn)
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime()
      ->Iterations(1)
      ->Repetitions(reps)
      ->ReportAggregatesOnly(true);
}

int register_vulkan_benchmarks() {
  // Registered before main(): decide the sizes by device type (lavapipe is slow).
  setenv("ATTNSCOPE_VK_VALIDATION", "0", 0);
  std::string why;
  auto ctx = vk::shared_context(&why);
  if (!ctx) return 0;
  const bool cpu = ctx->is_cpu();
  const bool quick = std::getenv("ATTN_BENCH_QUICK") != nullptr;
  const std::vector<int> dense_n =
      cpu || quick ? std::vector<int>{1024} : std::vector<int>{1024, 4096, 16384};
  for (int n : dense_n)
    add("BM_VulkanDense/n:" + std::to_string(n), n >= 16384 ? 3 : 5, [n](benchmark::State& s) {
      attention_case(s, 12, n, 64, "dense", nullptr, "dense causal H=12 d=64");
    });
  const int sparse_n = cpu || quick ? 4096 : 16384;
  for (double f : cpu ? std::vector<double>{0.1} : std::vector<double>{0.1, 0.2, 0.5}) {
    auto layout = std::make_shared<Layout>(block_layout(sparse_n, f));
    add("BM_VulkanBlockSparse/n:" + std::to_string(sparse_n) +
            "/fraction:" + std::to_string(f).substr(0, 3),
        3, [=](benchmark::State& s) {
          attention_case(s, 12, sparse_n, 64, "dense", layout.get(),
                         "block-sparse 64x64 causal H=12 d=64");
        });
  }
  add("BM_VulkanWindow/n:" + std::to_string(sparse_n) + "/window:256", 3,
      [sparse_n](benchmark::State& s) {
        attention_case(s, 12, sparse_n, 64, "window(size=256)", nullptr, "window 256 H=12 d=64");
      });
  const int topk_n = cpu ? 1024 : 4096;
  add("BM_VulkanTopk/n:" + std::to_string(topk_n) + "/k:64", 3, [topk_n](benchmark::State& s) {
    attention_case(s, 12, topk_n, 64, "topk(k=64)", nullptr, "exact top-64 keys (index lists)");
  });
  // Dynamic selection itself, on the GPU (vulkan backend's select()) and by the CPU selector.
  for (bool on_gpu : {true, false}) {
    const std::string where = on_gpu ? "gpu" : "cpu";
    add("BM_VulkanTopkSelect/n:" + std::to_string(topk_n) + "/k:64/select:" + where, 3,
        [=](benchmark::State& s) {
          select_case(s, 12, topk_n, 64, "topk(k=64)", on_gpu,
                      std::string("topk select ") + (on_gpu ? "GPU" : "CPU"));
        });
    add("BM_VulkanBlockTopkSelect/n:" + std::to_string(sparse_n) + "/block:64/k:8/select:" + where,
        3, [=](benchmark::State& s) {
          select_case(s, 12, sparse_n, 64, "block_topk(block=64,k=8)", on_gpu,
                      std::string("blk-topk select ") + (on_gpu ? "GPU" : "CPU"));
        });
  }
  add("BM_VulkanTile/n:" + std::to_string(cpu ? 1024 : 4096) + "/cells:512", 3,
      [cpu](benchmark::State& s) { tile_case(s, cpu ? 1024 : 4096, 512); });
  const char* allow_cpu = std::getenv("GPU_BENCH_ALLOW_CPU");
  if (std::getenv("ATTN_BENCH_GPU") && cpu && !(allow_cpu && std::string(allow_cpu) == "1"))
    std::fprintf(stderr,
                 "BM_VulkanGpu* not registered: the Vulkan device (%s) is a CPU; set "
                 "GPU_BENCH_ALLOW_CPU=1 to run them anyway\n",
                 ctx->device_name().c_str());
  else if (std::getenv("ATTN_BENCH_GPU")) {
    std::vector<int> sizes = {4096, 16384, 65536};
    if (const char* e = std::getenv("GPU_BENCH_SIZES")) {
      sizes.clear();
      for (std::istringstream in(e); in;) {
        int n = 0;
        if (in >> n && n > 0) sizes.push_back(n);
      }
    }
    for (int n : sizes)
      add("BM_VulkanGpuDense/n:" + std::to_string(n) + "/heads:32/d:128", n >= 65536 ? 3 : 5,
          [n](benchmark::State& s) {
            attention_case(s, 32, n, 128, "dense", nullptr, "dense causal H=32 d=128 fp32");
          });
  }
  return 0;
}

const int registered = register_vulkan_benchmarks();

}  // namespace
#endif  // ATTN_HAVE_VULKAN
