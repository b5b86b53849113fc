// What attribution costs against the forward pass it explains, on one model folder holding
// ids.npy (i32 [N]); registered only when ATTN_ATTRIB_MODEL names it
// (tests/bench/attribution_cost.py writes a GPT-2-small-shaped one at 256 tokens and judges the
// ratios):
//   BM_AttribForward  the plain forward pass (no capture): the unit of the ratios
//   BM_AttribReverse  one reverse pass for the last position's top token (the forward it starts
//                     with included), patterns and dz/dA kept as the attribution core keeps them;
//                     counters: the activations kept (trace_mib) and the peak RSS
//   BM_AttribIG       integrated gradients through the core (app/core/attribution), 32 steps
//   BM_AttribIGBf16   the same with bf16 matmuls (AttributionRequest::matmul; AMX where the CPU
//                     has it); counters: completeness, and its scores against the f32 run's
//                     (relative L2 distance, Spearman rank correlation)
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "app/core/attribution/attribution.h"
#include "models/arch/model.h"
#include "models/arch/reverse.h"
#include "models/formats/npy.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Loaded {
  std::unique_ptr<attn::models::Model> model;
  attn::models::ModelInput in;
};

Loaded load(const std::string& dir) {
  Loaded l;
  l.model = attn::models::load_model(dir);
  for (float v : attn::models::read_npy(dir + "/ids.npy").to_f32()) l.in.ids.push_back(int32_t(v));
  return l;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;
}

template <typename Fn>
void timed(benchmark::State& state, Fn fn) {
  std::vector<double> t;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  state.counters["min_s"] = t.front();
  state.counters["median_s"] = t[t.size() / 2];
}

void BM_AttribForward(benchmark::State& state, const std::string& dir) {
  const Loaded l = load(dir);
  l.model->forward(l.in);  // warm: first touch of the weights
  timed(state, [&] { benchmark::DoNotOptimize(l.model->forward(l.in).logits.data()); });
  state.counters["tokens"] = double(l.in.ids.size());
}

void BM_AttribReverse(benchmark::State& state, const std::string& dir) {
  const Loaded l = load(dir);
  attn::models::ReverseOptions o;
  o.keep_patterns = true;
  size_t trace = 0;
  double fwd = 1e30, bwd = 1e30;
  const double rss0 = peak_rss_mib();
  timed(state, [&] {
    const attn::models::Reverse r = l.model->reverse(l.in, {}, o);
    trace = r.trace_bytes;
    fwd = std::min(fwd, r.seconds_forward);
    bwd = std::min(bwd, r.seconds_backward);
    benchmark::DoNotOptimize(r.input_grad.data());
  });
  state.counters["trace_mib"] = double(trace) / (1 << 20);
  state.counters["forward_min_s"] = fwd;
  state.counters["backward_min_s"] = bwd;
  state.counters["peak_rss_mib"] = peak_rss_mib();
  state.counters["peak_rss_before_mib"] = rss0;
}

// Ranks (ties broken by index) for Spearman's correlation.
std::vector<double> ranks(const std::vector<float>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size(); ++i) r[order[i]] = double(i);
  return r;
}

double spearman(const std::vector<float>& a, const std::vector<float>& b) {
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = double(a.size()), mean = (n - 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return sab / std::sqrt(saa * sbb);
}

// Integrated gradients, 32 steps, with the matrix products in `matmul`'s precision.
void ig_row(benchmark::State& state, const std::string& dir, attn::models::Matmul matmul) {
  const Loaded l = load(dir);
  attn::core::AttributionRequest q;
  q.methods = {"integrated_gradients"};
  q.ig_steps = 32;
  q.matmul = matmul;
  double completeness = 0;
  std::vector<float> scores;
  timed(state, [&] {
    const attn::core::Attribution a = attn::core::attribute(*l.model, l.in, q);
    double s = 0;
    for (float v : a.methods[0].scores) s += v;
    completeness = s / a.methods[0].z_difference;
    scores = a.methods[0].scores;
  });
  state.counters["steps"] = 32;
  state.counters["sum_over_delta"] = completeness;
  if (matmul == attn::models::Matmul::F32) return;
  // The same attribution in f32 (untimed): how far bf16 matmuls move the scores.
  q.matmul = attn::models::Matmul::F32;
  const std::vector<float> ref = attn::core::attribute(*l.model, l.in, q).methods[0].scores;
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    d2 += double(scores[i] - ref[i]) * (scores[i] - ref[i]);
    r2 += double(ref[i]) * ref[i];
  }
  state.counters["rel_l2_vs_f32"] = std::sqrt(d2 / r2);
  state.counters["spearman_vs_f32"] = spearman(scores, ref);
}

void BM_AttribIG(benchmark::State& state, const std::string& dir) {
  ig_row(state, dir, attn::models::Matmul::F32);
}

void BM_AttribIGBf16(benchmark::State& state, const std::string& dir) {
  ig_row(state, dir, attn::models::Matmul::Bf16);
}

const int registered = [] {
  const char* dir = std::getenv("ATTN_ATTRIB_MODEL");
  if (!dir || !*dir) return 0;
  const std::string d(dir);
  benchmark::RegisterBenchmark("BM_AttribForward", BM_AttribForward, d)
      ->Iterations(5)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_AttribReverse", BM_AttribReverse, d)
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_AttribIG", BM_AttribIG, d)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_AttribIGBf16", BM_AttribIGBf16, d)
      ->Iterations(2)  // the fastest of two, as the forward's of five
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  return 1;
}();

}  // namespace
