// attn_bench: the compute core's performance claims, measured. Driven by run_bench.py, which
// adds the NumPy + OpenBLAS baselines and prints the table; every case here is one
// Google Benchmark entry with its metadata in counters:
//   dense causal attention (H=12, d=64) on the cpu and reference backends,
//   block-sparse causal attention at a given fraction of the causal 64x64 blocks,
//   an fp32 GEMM ceiling (Eigen, 2048^3, column blocks over the kernels' thread pool), and the
//   same per core (one thread, CPU time),
//   dense attention and key lists with Q, K and V stored in bf16 / f16 (precision_rows.py pairs
//   them with the f32 rows of the same run),
// and, for every attention case, the peak heap memory the backend allocated beyond its output
// (a counting allocator wraps operator new for the whole binary).
#include <benchmark/benchmark.h>
#include <malloc.h>

// GCC 12 warns inside Eigen's AVX-512 packet code (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Dense>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/cpu/huge_pages.h"
#include "compute/cpu/thread_pool.h"
#include "compute/layout.h"
#include "compute/precision.h"
#include "compute/problem.h"
#include "compute/registry.h"

// ---- counting allocator -------------------------------------------------------------------------

namespace {

std::atomic<int64_t> g_live{0}, g_peak{0};

void* note_alloc(void* p) {
  if (!p) throw std::bad_alloc();
  const int64_t now = g_live += int64_t(malloc_usable_size(p));
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}
void note_free(void* p) {
  if (p) g_live -= int64_t(malloc_usable_size(p));
  std::free(p);
}
void* aligned(std::size_t n, std::align_val_t a) {
  void* p = nullptr;
  if (posix_memalign(&p, std::max(sizeof(void*), std::size_t(a)), n ? n : 1) != 0) p = nullptr;
  return note_alloc(p);
}

}  // namespace

void* operator new(std::size_t n) {
  return note_alloc(std::malloc(n ? n : 1));
}
void* operator new[](std::size_t n) {
  return note_alloc(std::malloc(n ? n : 1));
}
void* operator new(std::size_t n, std::align_val_t a) {
  return aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return aligned(n, a);
}
void operator delete(void* p) noexcept {
  note_free(p);
}
void operator delete[](void* p) noexcept {
  note_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  note_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  note_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  note_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  note_free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  note_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  note_free(p);
}

namespace {

using namespace attn;

constexpr int kHeads = 12, kDim = 64;

const Problem& problem(int n) {
  static std::map<int, std::unique_ptr<Problem>> cache;
  auto& slot = cache[n];
  if (!slot)
    slot = std::make_unique<Problem>(random_problem(kHeads, kHeads, n, n, kDim, true, 7 + n));
  return *slot;
}

// Exactly round(fraction x causal blocks) of the causal 64x64 blocks: the diagonal always, the
// rest drawn uniformly from the blocks below it.
const Layout& block_layout(int n, double fraction) {
  static std::map<std::pair<int, int>, std::unique_ptr<Layout>> cache;
  auto& slot = cache[{n, int(fraction * 1000 + 0.5)}];
  if (slot) return *slot;
  const int bs = 64, nb = (n + bs - 1) / bs;
  const int64_t causal_blocks = int64_t(nb) * (nb + 1) / 2;
  const int64_t want = std::max<int64_t>(nb, std::llround(fraction * double(causal_blocks)));
  std::vector<std::pair<int, int>> below;
  for (int r = 0; r < nb; ++r)
    for (int c = 0; c < r; ++c) below.push_back({r, c});
  std::mt19937_64 rng(1234);
  std::shuffle(below.begin(), below.end(), rng);
  below.resize(size_t(want - nb));
  for (int r = 0; r < nb; ++r) below.push_back({r, r});
  std::sort(below.begin(), below.end());
  BlockLayout b;
  b.bq = b.bk = bs;
  b.n_qb = b.n_kb = nb;
  b.row_ptr.assign(nb + 1, 0);
  for (auto [r, c] : below) {
    b.col.push_back(c);
    b.full.push_back(1);  // no element mask: only the causal rule applies (on the diagonal)
    ++b.row_ptr[r + 1];
  }
  for (int r = 0; r < nb; ++r) b.row_ptr[r + 1] += b.row_ptr[r];
  slot = std::make_unique<Layout>();
  slot->kind = Layout::Kind::Blocks;
  slot->blocks = {std::move(b)};
  return *slot;
}

// Per query: every visible key up to `k`, else k - 1 random earlier keys and itself (a top-k
// shaped index layout for the gather kernel).
const Layout& index_layout(int n, int k) {
  static std::map<std::pair<int, int>, std::unique_ptr<Layout>> cache;
  auto& slot = cache[{n, k}];
  if (slot) return *slot;
  IndexLayout x;
  x.row_ptr.push_back(0);
  std::mt19937_64 rng(99);
  std::vector<int32_t> keys(n);
  for (int i = 0; i < n; ++i) {
    const int visible = i + 1;
    keys.resize(visible);
    for (int j = 0; j < visible; ++j) keys[j] = j;
    if (visible > k) {
      std::shuffle(keys.begin(), keys.end() - 1, rng);
      std::swap(keys[k - 1], keys[visible - 1]);
      keys.resize(k);
    }
    std::sort(keys.begin(), keys.end());
    x.col.insert(x.col.end(), keys.begin(), keys.end());
    x.row_ptr.push_back(int64_t(x.col.size()));
  }
  slot = std::make_unique<Layout>();
  slot->kind = Layout::Kind::Indices;
  slot->indices = {std::move(x)};
  return *slot;
}

// Vertical-slash shaped lines: `count` random key columns and the main diagonal plus
// count - 1 random others, the same for every head (the lines kernel).
const Layout& line_layout(int n, int count) {
  static std::map<std::pair<int, int>, std::unique_ptr<Layout>> cache;
  auto& slot = cache[{n, count}];
  if (slot) return *slot;
  std::mt19937_64 rng(4321);
  LineLayout x;
  for (int e = 0; e < count; ++e) x.columns.push_back(int32_t(rng() % uint64_t(n)));
  x.offsets.push_back(0);
  for (int e = 1; e < count; ++e) x.offsets.push_back(int64_t(1 + rng() % uint64_t(n - 1)));
  std::sort(x.columns.begin(), x.columns.end());
  x.columns.erase(std::unique(x.columns.begin(), x.columns.end()), x.columns.end());
  std::sort(x.offsets.begin(), x.offsets.end(), std::greater<>());
  x.offsets.erase(std::unique(x.offsets.begin(), x.offsets.end()), x.offsets.end());
  slot = std::make_unique<Layout>();
  slot->kind = Layout::Kind::Lines;
  slot->lines = {std::move(x)};
  return *slot;
}

// One attention case: times execute() only (the layout is built beforehand), and reports the
// kernels' own time beside it (`kernel_seconds`); `threads` 0 = all.
// `fraction` < 1 runs a block layout with that fraction of the causal blocks; `topk` > 0 an index
// layout with that many keys per query; `lines` > 0 a line layout with that many columns and
// diagonals; `spec` names the variant (its normaliser and modifiers); `prec` the storage of Q, K
// and V.
void attention_case(benchmark::State& st, const std::string& backend_name, int n, double fraction,
                    int threads = 0, const std::string& spec = "dense", int topk = 0, int lines = 0,
                    Precision prec = Precision::F32) {
  const Problem& p = problem(n);
  const Variant v = make_variant(spec);
  const Layout dense;
  const Layout& layout = lines > 0  ? line_layout(n, lines)
                         : topk > 0 ? index_layout(n, topk)
                                    : (fraction < 1.0 ? block_layout(n, fraction) : dense);
  // One backend per name for the whole binary, as a session keeps one: the cpu backend's 16-bit
  // storage and thread pool then come from an earlier execute, as they would in use.
  static std::map<std::string, std::unique_ptr<Backend>> backends;
  auto& backend = backends[backend_name];
  if (!backend) backend = make_backend(backend_name);
  int64_t kept = 0;
  for (int h = 0; h < p.n_heads; ++h) kept += layout_kept_entries(layout, p, h);
  const double visible = double(visible_entries(p)) * p.n_heads;
  double extra = 0, counted = 0, kernel = 0;
  for (auto _ : st) {
    // A layout of its own, moved into the result as run() moves the one a variant selected:
    // copying a cached top-1638 list at N = 16384 (107 MB) is the bench's doing, not the kernel's.
    st.PauseTiming();
    Layout owned = layout;
    st.ResumeTiming();
    const int64_t base = g_live.load();
    g_peak = base;
    RunOptions opt;
    opt.threads = threads;
    opt.precision = prec;
    Result r = backend->execute_owned(v, p, std::move(owned), opt);
    // The result's own payload (output, row statistics and the copy of the layout it records)
    // is not kernel scratch.
    double out_bytes = double(r.o.capacity() + r.row_stat.capacity()) * sizeof(float);
    for (const IndexLayout& x : r.layout.indices)
      out_bytes += double(x.col.capacity()) * 4 + double(x.row_ptr.capacity()) * 8;
    for (const LineLayout& x : r.layout.lines)
      out_bytes += double(x.columns.capacity()) * 4 + double(x.offsets.capacity()) * 8;
    for (const BlockLayout& b : r.layout.blocks)
      out_bytes += double(b.col.capacity()) * 4 + double(b.row_ptr.capacity()) * 4 +
                   double(b.full.capacity()) * sizeof(b.full[0]);
    extra = std::max(extra, double(g_peak.load() - base) - out_bytes);
    counted = r.stats.counted.flops;
    kernel += r.stats.kernel_seconds;
    benchmark::DoNotOptimize(r.o.data());
    st.PauseTiming();
    r.layout = Layout{};  // freed outside the timed region, where it was made
    st.ResumeTiming();
  }
  // The kernels alone (the backend's own clock): without allocating and zeroing the output,
  // which costs every case the same whatever its density.
  st.counters["kernel_seconds"] = kernel / double(std::max<int64_t>(1, st.iterations()));
  st.counters["n"] = n;
  st.counters["heads"] = p.n_heads;
  st.counters["d"] = p.d;
  st.counters["block_fraction"] = fraction;
  st.counters["density"] = double(kept) / visible;  // kept / causally visible entries
  st.counters["useful_flops"] = 4.0 * p.d * double(kept);
  st.counters["counted_flops"] = counted;
  st.counters["peak_extra_bytes"] = extra;
  const auto* cpu = dynamic_cast<const cpu::CpuBackend*>(backend.get());
  st.counters["topk"] = topk;
  st.counters["lines"] = lines;
  st.counters["element_bytes"] = element_bytes(prec);
  st.SetLabel(backend_name + " " + spec + (fraction < 1.0 ? " block_sparse" : "") +
              (topk > 0 ? " indices" : "") + (lines > 0 ? " lines" : "") +
              (cpu ? std::string(" isa=") + cpu->isa() : std::string()) +
              " precision=" + precision_name(prec));
}

// fp32 GEMM C = A B at n^3: column blocks of C handed out dynamically over `threads` threads
// (the kernels' own pool and scheduling, so both sides see the machine alike).
void gemm_case(benchmark::State& st, int n, int threads) {
  cpu::ThreadPool pool(threads);
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  const int block = 256, blocks = (n + block - 1) / block;
  for (auto _ : st) {
    pool.parallel_for(blocks, [&](int64_t k, int) {
      const int c0 = int(k) * block, w = std::min(block, n - c0);
      c.middleCols(c0, w).noalias() = a * b.middleCols(c0, w);
    });
    benchmark::DoNotOptimize(c.data());
  }
  st.counters["n"] = n;
  st.counters["gemm_threads"] = threads;
  st.counters["useful_flops"] = 2.0 * double(n) * n * n;
  st.SetLabel("eigen sgemm");
}

// The most a kernel that loads every kept entry's own K and V rows can reach on this machine:
// random rows of a working set (`keys` rows of K and of V, d = 64: 2048 keys make 1 MiB, which
// stays in L2), loaded and summed with nothing else to do, each thread its own entries (the
// kernels' pool). Scattered key lists (a top-k of 256 in 16K keys) cannot run faster per entry
// unless rows are reused from L1.
// Rows in a Problem's storage (AlignedFloats: each row on its own 64-byte lines), or with
// `split` 16 bytes into a line, where a plain std::vector<float> puts them (each vector load of
// a row then touches two lines; the problems were stored that way before).
void gather_ceiling_case(benchmark::State& st, int keys, int threads, bool split) {
  constexpr int d = 64;
  constexpr int64_t kEntries = int64_t(1) << 24, kSlice = int64_t(1) << 16;
  // Eight-float vectors: one AVX register on every x86-64-v3 machine (a wider generic vector
  // type compiles to memory round trips where the build has no 512-bit registers).
  using v8 = float __attribute__((vector_size(32)));
  cpu::ThreadPool pool(cpu::resolve_threads(threads));
  AlignedFloats k(size_t(keys) * d + 16, 1.0f), v(size_t(keys) * d + 16, 2.0f);
  const float* k0 = k.data() + (split ? 4 : 0);
  const float* v0 = v.data() + (split ? 4 : 0);
  std::vector<int32_t> idx(static_cast<size_t>(kEntries));
  std::mt19937 rng(7);
  for (auto& j : idx) j = int32_t(rng() % uint32_t(keys));
  std::vector<float> sums(size_t(pool.size()), 0.0f);
  for (auto _ : st) {
    pool.parallel_for(kEntries / kSlice, [&](int64_t s, int worker) {
      v8 acc[d / 8] = {};
      for (int64_t e = s * kSlice; e < (s + 1) * kSlice; ++e) {
        const float* kr = k0 + size_t(idx[size_t(e)]) * d;
        const float* vr = v0 + size_t(idx[size_t(e)]) * d;
        for (int c = 0; c < d / 8; ++c) {
          v8 a, b;
          std::memcpy(&a, kr + 8 * c, sizeof a);  // unaligned vector loads
          std::memcpy(&b, vr + 8 * c, sizeof b);
          acc[c] += a + b;
        }
      }
      for (int c = 0; c < d / 8; ++c)
        for (int l = 0; l < 8; ++l) sums[size_t(worker)] += acc[c][l];
    });
    benchmark::DoNotOptimize(sums.data());
  }
  st.counters["n"] = keys;
  st.counters["entries"] = double(kEntries);
  st.counters["useful_flops"] = 4.0 * d * double(kEntries);  // what a kernel would do per entry
  const std::string set = std::to_string(size_t(keys) * d * 8 >> 10) + " KiB set";
  st.SetLabel("loads of random K and V rows, " + set +
              (split ? ", 16 bytes into a line" : ", as a Problem stores them"));
}

void register_all() {
  const bool quick = std::getenv("ATTN_BENCH_QUICK") != nullptr;
  // ATTN_BENCH_REPS overrides every case's repetitions (run_bench.py's paired rounds use 1).
  const char* reps_env = std::getenv("ATTN_BENCH_REPS");
  const int reps_override = reps_env ? std::max(1, std::atoi(reps_env)) : 0;
  auto add = [reps_override](const std::string& name, int reps, auto fn) {
    if (reps_override) reps = reps_override;
    benchmark::RegisterBenchmark(name.c_str(), fn)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(1)
        ->Repetitions(reps)
        ->ReportAggregatesOnly(true);
  };
  const int threads = cpu::resolve_threads(0);
  add("gemm_eigen/n:2048", 7, [threads](benchmark::State& s) { gemm_case(s, 2048, threads); });
  // Per core: one thread each, compared by CPU time (steadier than wall time on a busy machine).
  add("gemm_eigen_1t/n:2048", 5, [](benchmark::State& s) { gemm_case(s, 2048, 1); });
  add("cpu_dense_1t/n:4096", 5,
      [](benchmark::State& s) { attention_case(s, "cpu", 4096, 1.0, 1); });
  for (int n : quick ? std::vector<int>{1024, 4096} : std::vector<int>{1024, 4096, 16384}) {
    const int reps = n >= 16384 ? 3 : (n >= 4096 ? 7 : 11);
    add("cpu_dense/n:" + std::to_string(n), reps,
        [n](benchmark::State& s) { attention_case(s, "cpu", n, 1.0); });
  }
  add("reference_dense/n:1024", 3,
      [](benchmark::State& s) { attention_case(s, "reference", 1024, 1.0); });
  // Block layouts at low density, at the lengths users load (dense at 32768 runs only here).
  if (!quick)
    add("cpu_dense/n:32768", 3, [](benchmark::State& s) { attention_case(s, "cpu", 32768, 1.0); });
  for (int sparse_n : quick ? std::vector<int>{4096} : std::vector<int>{16384, 32768})
    for (double f : {0.05, 0.1, 0.2, 0.5}) {
      std::string frac = std::to_string(f);
      frac.erase(frac.find_last_not_of('0') + 1);  // 0.050000 -> 0.05, as run_bench.py names it
      add("cpu_block_sparse/n:" + std::to_string(sparse_n) + "/fraction:" + frac, quick ? 3 : 5,
          [f, sparse_n](benchmark::State& s) { attention_case(s, "cpu", sparse_n, f); });
    }
  // The other kernels, for their time and extra memory: the buffered normaliser (entmax), the
  // sequential selective kernel, and the gather kernel on a top-256 index layout.
  add("cpu_entmax/n:4096", 3,
      [](benchmark::State& s) { attention_case(s, "cpu", 4096, 1.0, 0, "dense+entmax15"); });
  add("cpu_selective/n:4096", 3,
      [](benchmark::State& s) { attention_case(s, "cpu", 4096, 1.0, 0, "selective"); });
  // Index layouts (per-query key lists) at the sizes top-k selection produces.
  for (int n : quick ? std::vector<int>{4096} : std::vector<int>{4096, 16384})
    for (int k : {256, 1638})
      add("cpu_gather_top" + std::to_string(k) + "/n:" + std::to_string(n), 3,
          [n, k](benchmark::State& s) { attention_case(s, "cpu", n, 1.0, 0, "dense", k); });
  for (bool split : {false, true})
    add(std::string("cpu_gather_ceiling") + (split ? "_split" : "") + "/n:2048", 3,
        [threads, split](benchmark::State& s) { gather_ceiling_case(s, 2048, threads, split); });
  // The same loads from a set of K and V rows deep inside L2 (256 KiB), and from sets beyond it
  // (a head's rows at N = 8192 and 16384: 4 and 8 MiB): the cost of a fetched row against the
  // working set.
  for (int keys : {512, 8192, 16384})
    add("cpu_gather_ceiling/n:" + std::to_string(keys), 3,
        [threads, keys](benchmark::State& s) { gather_ceiling_case(s, keys, threads, false); });
  // Line layouts (vertical-slash's default 128 columns and 128 diagonals).
  if (!quick)
    add("cpu_lines128/n:16384", 3,
        [](benchmark::State& s) { attention_case(s, "cpu", 16384, 1.0, 0, "dense", 0, 128); });
  // Reduced-precision storage: dense and key lists over 16-bit rows (f16 dense for information).
  for (int n : quick ? std::vector<int>{4096} : std::vector<int>{4096, 16384}) {
    const int reps = n >= 16384 ? 3 : 7;
    for (Precision prec : {Precision::Bf16, Precision::F16})
      add(std::string("cpu_dense_") + precision_name(prec) + "/n:" + std::to_string(n), reps,
          [n, prec](benchmark::State& s) {
            attention_case(s, "cpu", n, 1.0, 0, "dense", 0, 0, prec);
          });
    for (int k : {256, 1638})
      add("cpu_gather_top" + std::to_string(k) + "_bf16/n:" + std::to_string(n), 3,
          [n, k](benchmark::State& s) {
            attention_case(s, "cpu", n, 1.0, 0, "dense", k, 0, Precision::Bf16);
          });
  }
  add("gemm_eigen_after/n:2048", 7,
      [threads](benchmark::State& s) { gemm_case(s, 2048, threads); });
}

}  // namespace

int main(int argc, char** argv) {
  // The allocator policy attnscope's main sets, so the rows measure what the app runs.
  attn::cpu::reuse_freed_memory();
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
