#include "compute/vulkan/tile_query.h"

#include <algorithm>
#include <cmath>

#include "compute/error.h"
#include "compute/vulkan/attention_kernels.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/job.h"
#include "compute/vulkan/kernel_layout.h"
#include "compute/vulkan/shaders.h"

namespace attn::vk {

namespace {

// Must match the Push block of shaders/tile_probabilities.comp.
struct TilePush {
  uint32_t n_q, n_k, head, n_heads;
  float scale, log_nk;
  uint32_t q0, k0, w, pool_mean, strip, n_strips, bq;
};

constexpr uint32_t kThreads = 64;               // local size of the tile shader
constexpr double kEntriesPerInvocation = 1024;  // per dispatch: far below lavapipe's loop cap
constexpr int kMaxStrips = 4096;

// Floor boundaries lo + x * n / cells for x in [0, cells], as compute/probabilities.cpp uses.
std::vector<uint32_t> bounds(int lo, int n, int cells) {
  std::vector<uint32_t> b(size_t(cells) + 1);
  for (int x = 0; x <= cells; ++x) b[size_t(x)] = uint32_t(lo + int64_t(x) * n / cells);
  return b;
}

void check_request(const Problem& p, const Result& r, const TileRequest& t) {
  require(t.head >= 0 && t.head < p.n_heads && 0 <= t.q0 && t.q0 < t.q1 && t.q1 <= p.n_q &&
              0 <= t.k0 && t.k0 < t.k1 && t.k1 <= p.n_k && t.w > 0 && t.h > 0,
          ErrorCode::InvalidArgument,
          "vulkan tile query: head " + std::to_string(t.head) + ", rows [" + std::to_string(t.q0) +
              ", " + std::to_string(t.q1) + "), keys [" + std::to_string(t.k0) + ", " +
              std::to_string(t.k1) + "), " + std::to_string(t.w) + " x " + std::to_string(t.h) +
              " cells: empty or out of range for " + std::to_string(p.n_heads) + " heads x " +
              std::to_string(p.n_q) + " x " + std::to_string(p.n_k));
  require(
      r.n_heads == p.n_heads && r.n_q == p.n_q && r.row_stat.size() == size_t(p.n_heads) * p.n_q,
      ErrorCode::InvalidArgument, "vulkan tile query: result does not belong to this problem");
}

}  // namespace

std::string tile_query_unsupported(const Context& ctx, const Variant& v, const Problem& p) {
  if (v.selective())
    return "selective attention replays every earlier row; its tiles are computed on the CPU";
  if (v.approximation())
    return "an approximation's implied matrix is served by its own CPU routine";
  if (ctx.lost()) return "the Vulkan device " + ctx.device_name() + " was lost";
  if (v.mods().size() > 4) return "more than 4 score modifiers";
  if (p.d > 1024) return "head dimension over 1024";
  return "";
}

double tile_probabilities_to_image(Context& ctx, const Variant& v, const Problem& p,
                                   const Result& r, const TileRequest& t, TileImage& image) {
  check_request(p, r, t);
  std::string why = tile_query_unsupported(ctx, v, p);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, "vulkan tile query: " + why);
  const int w = std::min(t.w, t.k1 - t.k0), h = std::min(t.h, t.q1 - t.q0);
  const int nq = t.q1 - t.q0, nk = t.k1 - t.k0;
  const int dp = (p.d + 3) / 4 * 4;
  const KernelLayout kl = make_kernel_layout(p, r.layout, 32, t.head);

  // Rows [q0, q1) of the head and keys [k0, k1) of its kv head, zero-padded to dp.
  std::vector<float> qrows(size_t(nq) * dp, 0.0f), krows(size_t(nk) * dp, 0.0f);
  for (int i = 0; i < nq; ++i)
    std::copy_n(p.q_row(t.head, t.q0 + i), p.d, qrows.begin() + size_t(i) * dp);
  for (int j = 0; j < nk; ++j)
    std::copy_n(p.k_row(t.head, t.k0 + j), p.d, krows.begin() + size_t(j) * dp);
  std::vector<float> stats(r.row_stat.begin() + size_t(t.head) * p.n_q,
                           r.row_stat.begin() + size_t(t.head + 1) * p.n_q);
  const std::vector<uint32_t> rb = bounds(t.q0, nq, h), cb = bounds(t.k0, nk, w);
  // Invocations per cell: about 16 entries each (up to the 64 of a workgroup), so small cells
  // do not leave most of a workgroup idle.
  const double cell_entries = double((nq + h - 1) / h) * ((nk + w - 1) / w);
  uint32_t cell_threads = 1;
  while (cell_threads < kThreads && cell_threads * 16 < cell_entries) cell_threads *= 2;
  const int strips = int(std::ceil(cell_entries / (cell_threads * kEntriesPerInvocation)));
  require(strips <= kMaxStrips, ErrorCode::Unsupported,
          "vulkan tile query: cells of " + std::to_string(cell_entries) +
              " entries each are too coarse; request more cells");

  SpecConstants spec;
  spec.set(0, uint32_t(dp)).set(16, kl.indices ? 1 : 0).set(17, cell_threads);
  set_score_constants(spec, v.mods(), v.normaliser());
  const ComputePipeline& pipeline =
      ctx.pipelines().get(tile_probabilities_shader(), 14, sizeof(TilePush), spec);

  Job job(ctx);
  const int b_q = job.input(qrows), b_k = job.input(krows);
  const int b_qp = job.input(query_positions(p)), b_kp = job.input(key_positions(p));
  const int b_ke = job.input(kl.kend);
  const int b_rp = job.input(kl.range_ptr), b_rg = job.input(kl.ranges);
  const int b_mk = job.input(kl.mask_bits);
  const int b_ip = job.input(kl.idx_ptr), b_ix = job.input(kl.idx);
  const int b_st = job.input(stats);
  const int b_cells = job.buffer(size_t(w) * h * sizeof(float));
  const int b_rb = job.input(rb), b_cb = job.input(cb);
  TilePush push{};
  push.n_q = uint32_t(p.n_q);
  push.n_k = uint32_t(p.n_k);
  push.head = uint32_t(t.head);
  push.n_heads = uint32_t(p.n_heads);
  push.scale = p.effective_scale();
  push.log_nk = std::log(float(p.n_k));
  push.q0 = uint32_t(t.q0);
  push.k0 = uint32_t(t.k0);
  push.w = uint32_t(w);
  push.pool_mean = t.pool == Pool::Mean ? 1 : 0;
  push.n_strips = uint32_t(strips);
  push.bq = uint32_t(kl.indices ? 1 : kl.bq);
  const uint32_t cells_per_group = kThreads / cell_threads;
  for (int s = 0; s < strips; ++s) {
    push.strip = uint32_t(s);
    if (s > 0) job.compute_barrier();
    job.dispatch(
        pipeline,
        {b_q, b_k, b_qp, b_kp, b_ke, b_rp, b_rg, b_mk, b_ip, b_ix, b_st, b_cells, b_rb, b_cb},
        &push, sizeof push, (uint32_t(w) + cells_per_group - 1) / cells_per_group, uint32_t(h));
  }
  image.ensure_size(w, h);
  job.copy_to_image(b_cells, image.image(), uint32_t(w), uint32_t(h));
  double seconds = job.run();
  image.mark_written();
  return seconds;
}

Tile tile_probabilities_vulkan(std::shared_ptr<Context> ctx, const Variant& v, const Problem& p,
                               const Result& r, const TileRequest& t) {
  require(ctx != nullptr, ErrorCode::Device, "vulkan tile query: no Vulkan context");
  TileImage image(ctx);
  tile_probabilities_to_image(*ctx, v, p, r, t, image);
  return image.read_back();
}

}  // namespace attn::vk
