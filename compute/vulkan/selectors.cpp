#include "compute/vulkan/selectors.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "compute/error.h"
#include "compute/variants/selectors/selector_util.h"
#include "compute/vulkan/attention_kernels.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/job.h"
#include "compute/vulkan/shaders.h"

namespace attn::vk {

namespace {

// Must match the Push blocks of shaders/topk_scores.comp, topk_select.comp, block_pool.comp and
// block_scores.comp.
struct TopkScoresPush {
  uint32_t n_q, n_k, d4, group, i_begin, i_count, h_begin;
};
struct TopkSelectPush {
  uint32_t n_q, n_k, k, i_begin, i_count, h_begin;
};
struct PoolPush {
  uint32_t n, d, block, nb;
};
struct BlockScoresPush {
  uint32_t n_qb, n_kb, d, group;
};

constexpr int kTile = 32;  // queries and keys per topk_scores workgroup
// topk_select: a workgroup of 256 invocations per row on GPUs; 16 on CPU devices, where
// lavapipe runs a workgroup's invocations in turns between barriers (measured ~2-3x faster
// than 256 there). Each invocation takes 16 keys per block.
constexpr uint32_t kSelectKeysPerInvocation = 16;
uint32_t select_invocations(const Context& ctx) {
  return ctx.is_cpu() ? 16 : 256;
}
// lavapipe's loop limit (~65k back-edges per invocation): a row costs about 5 * n_k / 256 + 40
// of them on CPU devices, so longer rows select on the CPU there.
constexpr int kCpuDeviceMaxKeys = 1 << 18;
constexpr size_t kDefaultScratch = size_t(128) << 20;

// Q and K rows are read as whole vec4s.
int padded_dim(int d) {
  return (d + 3) / 4 * 4;
}

std::vector<uint32_t> visible_keys(const Problem& p) {
  std::vector<uint32_t> kend(size_t(p.n_q));
  for (int i = 0; i < p.n_q; ++i)
    kend[size_t(i)] = uint32_t(p.causal ? detail::last_visible_key(p, i) + 1 : p.n_k);
  return kend;
}

std::string common_unsupported(const Context& ctx, const Problem& p, double q_bytes,
                               double k_bytes) {
  if (ctx.lost()) return "the Vulkan device " + ctx.device_name() + " was lost";
  const double range = double(ctx.limits().maxStorageBufferRange);
  if (q_bytes > range || k_bytes > range)
    return "Q/K of " + std::to_string(std::max(q_bytes, k_bytes) / 1048576.0) +
           " MiB exceed the device's storage-buffer range";
  const auto& count = ctx.limits().maxComputeWorkGroupCount;
  if (uint32_t(p.n_heads) > count[1] || uint32_t(p.n_heads) > count[2])
    return "more heads than the device's workgroup count limit";
  return "";
}

}  // namespace

std::string topk_select_unsupported(const Context& ctx, const Problem& p, int k) {
  const int dp = padded_dim(p.d);
  std::string why =
      common_unsupported(ctx, p, 4.0 * p.n_heads * p.n_q * dp, 4.0 * p.n_kv_heads * p.n_k * dp);
  if (!why.empty()) return why;
  if (ctx.limits().maxComputeWorkGroupInvocations < select_invocations(ctx))
    return "fewer than " + std::to_string(select_invocations(ctx)) + " invocations per workgroup";
  if (ctx.is_cpu() && p.n_k > kCpuDeviceMaxKeys)
    return "rows longer than " + std::to_string(kCpuDeviceMaxKeys) +
           " keys exceed a CPU device's loop limit";
  const double range = double(ctx.limits().maxStorageBufferRange);
  if (4.0 * kTile * p.n_k > std::min<double>(range, kDefaultScratch))
    return "rows of " + std::to_string(p.n_k) + " keys too long for the score scratch buffer";
  double kept = 0;
  for (uint32_t nv : visible_keys(p)) kept += std::min<double>(std::max(k, 0), nv);
  if (4.0 * kept * p.n_heads > range) return "the kept key lists exceed the storage-buffer range";
  return "";
}

std::string block_topk_select_unsupported(const Context& ctx, const Problem& p, int block) {
  std::string why =
      common_unsupported(ctx, p, 4.0 * p.n_heads * p.n_q * p.d, 4.0 * p.n_kv_heads * p.n_k * p.d);
  if (!why.empty() || block < 1) return why.empty() ? "block < 1" : why;
  const double n_qb = (p.n_q + block - 1) / block, n_kb = (p.n_k + block - 1) / block;
  if (n_qb > ctx.limits().maxComputeWorkGroupCount[1])
    return "more query blocks than the device's workgroup count limit";
  if (4.0 * p.n_heads * n_qb * n_kb > double(ctx.limits().maxStorageBufferRange))
    return "block scores exceed the storage-buffer range";
  return "";
}

Layout select_topk(Context& ctx, const Problem& p, int k, SelectStats* stats,
                   const TopkSelectOptions& options) {
  require(k >= 0, ErrorCode::InvalidArgument,
          "vulkan top-k selector: k must be >= 0, got " + std::to_string(k));
  const uint32_t wg = options.invocations ? uint32_t(options.invocations) : select_invocations(ctx);
  require(wg >= 8 && wg <= 256 && (wg & (wg - 1)) == 0 &&
              wg <= ctx.limits().maxComputeWorkGroupInvocations,
          ErrorCode::InvalidArgument,
          "vulkan top-k selector: invocations must be a power of two in [8, 256] the device "
          "allows, got " +
              std::to_string(wg));
  std::string why = topk_select_unsupported(ctx, p, k);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, "vulkan top-k selector: " + why);
  const int dp = padded_dim(p.d);
  const std::vector<uint32_t> kend = visible_keys(p);

  // Output slots: row (h, i) keeps min(k, kend[i]) keys starting at out_ptr[h * n_q + i].
  std::vector<uint32_t> out_ptr(size_t(p.n_heads) * p.n_q);
  uint32_t total = 0;
  double flops = 0;
  for (int h = 0; h < p.n_heads; ++h)
    for (int i = 0; i < p.n_q; ++i) {
      out_ptr[size_t(h) * p.n_q + i] = total;
      total += std::min<uint32_t>(uint32_t(k), kend[size_t(i)]);
      flops += 2.0 * p.d * kend[size_t(i)];
    }

  // Chunks of rows whose scores fit the scratch buffer: whole heads when a head fits, else
  // runs of queries (a multiple of the score tile) of one head.
  const double range = double(ctx.limits().maxStorageBufferRange);
  size_t scratch = options.scratch_bytes ? options.scratch_bytes : kDefaultScratch;
  scratch = size_t(std::min<double>(double(scratch), range));
  const size_t row_bytes = size_t(p.n_k) * 4;
  int64_t rows = std::max<int64_t>(kTile, int64_t(scratch / row_bytes));
  const int64_t max_groups = ctx.limits().maxComputeWorkGroupCount[0];
  int heads_per = 1, queries_per = p.n_q;
  if (rows >= p.n_q && p.n_q <= max_groups) {
    heads_per = int(std::min<int64_t>(p.n_heads, rows / p.n_q));
  } else {
    queries_per = int(std::min<int64_t>(rows, max_groups) / kTile * kTile);
  }

  Job job(ctx);
  std::vector<float> qs, ks;
  const int bq = job.input(pad_rows(p.q, p.d, dp, qs));
  const int bk = job.input(pad_rows(p.k, p.d, dp, ks));
  const int bke = job.input(kend);
  const int bptr = job.input(out_ptr);
  const int bbits = job.buffer(size_t(heads_per) * queries_per * row_bytes);
  const int bout = job.buffer(size_t(total) * 4);
  const ComputePipeline& score_pipe =
      ctx.pipelines().get(topk_scores_shader(), 4, sizeof(TopkScoresPush), SpecConstants());
  SpecConstants sel_spec;
  sel_spec.set(0, wg).set(1, kSelectKeysPerInvocation);
  const ComputePipeline& select_pipe =
      ctx.pipelines().get(topk_select_shader(), 4, sizeof(TopkSelectPush), sel_spec);
  bool first = true;
  for (int h0 = 0; h0 < p.n_heads; h0 += heads_per) {
    const int nh = std::min(heads_per, p.n_heads - h0);
    for (int i0 = 0; i0 < p.n_q; i0 += queries_per) {
      const int ni = std::min(queries_per, p.n_q - i0);
      const uint32_t kmax = *std::max_element(kend.begin() + i0, kend.begin() + i0 + ni);
      if (!first) job.compute_barrier();  // the previous chunk's select read the scratch
      first = false;
      TopkScoresPush sp{
          uint32_t(p.n_q), uint32_t(p.n_k), uint32_t(dp / 4), uint32_t(p.n_heads / p.n_kv_heads),
          uint32_t(i0),    uint32_t(ni),    uint32_t(h0)};
      job.dispatch(score_pipe, {bq, bk, bke, bbits}, &sp, sizeof sp,
                   uint32_t((ni + kTile - 1) / kTile), (kmax + kTile - 1) / kTile, uint32_t(nh));
      job.compute_barrier();
      TopkSelectPush xp{uint32_t(p.n_q), uint32_t(p.n_k), uint32_t(k),
                        uint32_t(i0),    uint32_t(ni),    uint32_t(h0)};
      job.dispatch(select_pipe, {bbits, bke, bptr, bout}, &xp, sizeof xp, uint32_t(ni),
                   uint32_t(nh));
    }
  }
  std::vector<int32_t> kept(total);
  job.read_back(bout, kept.data(), size_t(total) * 4);
  const double seconds = job.run();

  Layout l;
  l.kind = Layout::Kind::Indices;
  l.indices.resize(size_t(p.n_heads));
  for (int h = 0; h < p.n_heads; ++h) {
    IndexLayout& x = l.indices[size_t(h)];
    const uint32_t begin = out_ptr[size_t(h) * p.n_q];
    const uint32_t end = h + 1 < p.n_heads ? out_ptr[size_t(h + 1) * p.n_q] : total;
    x.col.assign(kept.begin() + begin, kept.begin() + end);
    x.row_ptr.resize(size_t(p.n_q) + 1);
    for (int i = 0; i <= p.n_q; ++i)
      x.row_ptr[size_t(i)] =
          int64_t(i < p.n_q ? out_ptr[size_t(h) * p.n_q + i] : end) - int64_t(begin);
  }
  if (stats) {
    stats->flops = flops;
    stats->seconds = seconds;
  }
  return l;
}

Layout select_block_topk(Context& ctx, const Problem& p, int block, int k, SelectStats* stats) {
  require(block >= 1 && k >= 0, ErrorCode::InvalidArgument,
          "vulkan block top-k selector: needs block >= 1 and k >= 0, got block = " +
              std::to_string(block) + ", k = " + std::to_string(k));
  std::string why = block_topk_select_unsupported(ctx, p, block);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, "vulkan block top-k selector: " + why);
  const detail::BlockGrid g(p, block);
  std::vector<uint32_t> n_vis(g.n_vis.begin(), g.n_vis.end());

  Job job(ctx);
  const int bq = job.input(p.q);
  const int bk = job.input(p.k);
  const int bpq = job.buffer(size_t(p.n_heads) * g.n_qb * p.d * 4);
  const int bpk = job.buffer(size_t(p.n_kv_heads) * g.n_kb * p.d * 4);
  const int bnv = job.input(n_vis);
  const size_t n_scores = size_t(p.n_heads) * g.n_qb * g.n_kb;
  const int bs = job.buffer(n_scores * 4);
  const ComputePipeline& pool =
      ctx.pipelines().get(block_pool_shader(), 2, sizeof(PoolPush), SpecConstants());
  const ComputePipeline& score =
      ctx.pipelines().get(block_scores_shader(), 4, sizeof(BlockScoresPush), SpecConstants());
  PoolPush qp{uint32_t(p.n_q), uint32_t(p.d), uint32_t(block), uint32_t(g.n_qb)};
  job.dispatch(pool, {bq, bpq}, &qp, sizeof qp, uint32_t((size_t(g.n_qb) * p.d + 63) / 64),
               uint32_t(p.n_heads));
  PoolPush kp{uint32_t(p.n_k), uint32_t(p.d), uint32_t(block), uint32_t(g.n_kb)};
  job.dispatch(pool, {bk, bpk}, &kp, sizeof kp, uint32_t((size_t(g.n_kb) * p.d + 63) / 64),
               uint32_t(p.n_kv_heads));
  job.compute_barrier();
  BlockScoresPush sp{uint32_t(g.n_qb), uint32_t(g.n_kb), uint32_t(p.d),
                     uint32_t(p.n_heads / p.n_kv_heads)};
  job.dispatch(score, {bpq, bpk, bnv, bs}, &sp, sizeof sp, uint32_t((g.n_kb + 63) / 64),
               uint32_t(g.n_qb), uint32_t(p.n_heads));
  std::vector<float> scores(n_scores);
  job.read_back(bs, scores.data(), n_scores * 4);
  const double gpu_seconds = job.run();

  // The k best other visible blocks per query block, as the CPU selector picks them.
  const auto t0 = std::chrono::steady_clock::now();
  Layout l;
  l.kind = Layout::Kind::Blocks;
  std::vector<std::vector<int32_t>> rows(size_t(g.n_qb));
  std::vector<int32_t> order;
  for (int h = 0; h < p.n_heads; ++h) {
    for (int r = 0; r < g.n_qb; ++r) {
      rows[size_t(r)].clear();
      const int nv = g.n_vis[size_t(r)], diag = g.diag[size_t(r)];
      if (nv == 0) continue;
      const float* s = scores.data() + (size_t(h) * g.n_qb + r) * g.n_kb;
      order.clear();
      for (int c = 0; c < nv; ++c)
        if (c != diag) order.push_back(c);
      const int take = std::min<int>(k, int(order.size()));
      std::partial_sort(order.begin(), order.begin() + take, order.end(),
                        [&](int a, int b) { return s[a] != s[b] ? s[a] > s[b] : a < b; });
      rows[size_t(r)].assign(order.begin(), order.begin() + take);
      rows[size_t(r)].push_back(diag);
      std::sort(rows[size_t(r)].begin(), rows[size_t(r)].end());
    }
    l.blocks.push_back(detail::block_layout_from_rows(rows, block, p));
  }
  const double host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats) {
    stats->flops = detail::pooled_scoring_flops(p, block, p.d);
    stats->seconds = gpu_seconds + host_seconds;
  }
  return l;
}

}  // namespace attn::vk
