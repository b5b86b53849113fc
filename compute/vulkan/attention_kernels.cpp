#include "compute/vulkan/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compute/error.h"
#include "compute/half_bits.h"
#include "compute/kv/kv_precision.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/job.h"
#include "compute/vulkan/kernel_layout.h"
#include "compute/vulkan/shaders.h"

namespace attn::vk {

namespace {

// Must match the Push block of shaders/attention_common.glsl.
struct AttentionPush {
  uint32_t n_q, n_k, n_heads, group;
  float scale, log_nk;
  uint32_t per_head_layout, bq, n_qb, chunks;
  uint32_t pass_begin, pass_end, key_begin, key_end, flags;
};
constexpr uint32_t kFlagFirst = 1, kFlagLast = 2;
constexpr int kStateFloats = 8 + 3 * 16;  // STATE in attention_common.glsl
// lavapipe skips loop iterations past ~65k back-edges per invocation; a looped kernel takes a
// few back-edges per key, so CPU devices get at most this many keys per dispatch.
constexpr int kCpuKeysPerDispatch = 4096;

constexpr int kMaxHeadDim = 256;     // per-lane registers beyond this would spill badly
constexpr int kEntmaxPrePasses = 4;  // max pass + 3 threshold passes (ENT_PASSES + 1)

uint32_t norm_id(Normaliser::Kind k) {
  switch (k) {
    case Normaliser::Kind::Softmax:
      return 0;
    case Normaliser::Kind::Sigmoid:
      return 1;
    case Normaliser::Kind::Relu:
      return 2;
    case Normaliser::Kind::Entmax15:
      return 3;
    case Normaliser::Kind::SoftplusL1:
      return 4;
  }
  return 0;
}

uint32_t mod_id(ScoreMod::Kind k) {
  switch (k) {
    case ScoreMod::Kind::Temperature:
      return 0;
    case ScoreMod::Kind::Alibi:
      return 1;
    case ScoreMod::Kind::Softcap:
      return 2;
  }
  return 0;
}

}  // namespace

bool choose_kernel_config(const Context& ctx, int d, KernelConfig* config, std::string* why) {
  KernelConfig c;
  if (d > kMaxHeadDim) {
    if (why) *why = "head dimension " + std::to_string(d) + " > " + std::to_string(kMaxHeadDim);
    return false;
  }
  c.lanes = d > 128 ? 8 : 4;
  while (c.lanes > int(ctx.subgroup_size())) c.lanes /= 2;
  c.rows = 32;
  if (ctx.is_cpu()) {
    // lavapipe: looped tiles (unrolled ones take many seconds to compile) and bounded keys per
    // dispatch. Four lanes per row also keep its compile time down (fewer registers per lane).
    c.lanes = std::min(c.lanes, 4);
    c.unrolled = false;
    c.keys_per_dispatch = kCpuKeysPerDispatch;
  }
  c.d_padded = (d + 4 * c.lanes - 1) / (4 * c.lanes) * (4 * c.lanes);
  while (c.rows * c.lanes > int(ctx.limits().maxComputeWorkGroupInvocations)) c.rows /= 2;
  const size_t shared = ctx.limits().maxComputeSharedMemorySize;
  c.tile = 32;
  while (c.tile >= 8 && size_t(2 * c.tile * c.d_padded + c.tile) * 4 > shared) c.tile /= 2;
  if (c.tile < 8) {
    if (why)
      *why = "shared memory (" + std::to_string(shared) +
             " bytes) too small for d = " + std::to_string(d);
    return false;
  }
  if (config) *config = c;
  return true;
}

void set_score_constants(SpecConstants& spec, const std::vector<ScoreMod>& mods,
                         const Normaliser& norm) {
  spec.set(4, norm_id(norm.kind)).set_float(5, norm.a).set(6, uint32_t(mods.size()));
  for (uint32_t m = 0; m < 4; ++m) {
    spec.set(7 + m, m < mods.size() ? mod_id(mods[m].kind) : 0);
    spec.set_float(11 + m, m < mods.size() ? mods[m].a : 1.0f);
  }
}

std::string attention_unsupported(const Context& ctx, const Problem& p,
                                  const std::vector<ScoreMod>& mods, const Normaliser& norm) {
  (void)norm;
  if (ctx.lost()) return "the Vulkan device " + ctx.device_name() + " was lost";
  if (mods.size() > 4) return "more than 4 score modifiers";
  std::string why;
  KernelConfig c;
  if (!choose_kernel_config(ctx, p.d, &c, &why)) return why;
  const double limit = double(ctx.limits().maxStorageBufferRange);
  const double q_bytes = double(p.n_heads) * p.n_q * c.d_padded * 4;
  const double kv_bytes = double(p.n_kv_heads) * p.n_k * c.d_padded * 4;
  if (q_bytes > limit || kv_bytes > limit)
    return "Q/K/V/O buffers of " + std::to_string(std::max(q_bytes, kv_bytes) / 1048576.0) +
           " MiB exceed the device's storage-buffer range of " + std::to_string(limit / 1048576.0) +
           " MiB (use fewer heads per problem)";
  if (p.n_heads > int(ctx.limits().maxComputeWorkGroupCount[1]))
    return "more heads than the device's workgroup count limit";
  return "";
}

std::span<const float> pad_rows(std::span<const float> x, int d, int dp,
                                std::vector<float>& storage) {
  if (d == dp) return x;
  const size_t rows = x.size() / size_t(d);
  storage.assign(rows * size_t(dp), 0.0f);
  for (size_t r = 0; r < rows; ++r)
    std::copy(x.begin() + r * d, x.begin() + (r + 1) * d, storage.begin() + r * dp);
  return storage;
}

Result attention_result(AttentionOutput out, const Problem& p, const Layout& layout) {
  Result r;
  r.n_heads = p.n_heads;
  r.n_q = p.n_q;
  r.d = p.d;
  r.o = std::move(out.o);
  r.row_stat = std::move(out.row_stat);
  r.layout = layout;
  r.stats.counted.flops = out.flops;
  r.stats.counted.bytes = out.bytes;
  r.stats.kernel_seconds = out.seconds;
  return r;
}

std::vector<int32_t> query_positions(const Problem& p) {
  std::vector<int32_t> pos(size_t(p.n_q));
  for (int i = 0; i < p.n_q; ++i) pos[size_t(i)] = p.qpos(i);
  return pos;
}

std::vector<int32_t> key_positions(const Problem& p) {
  std::vector<int32_t> pos(size_t(p.n_k));
  for (int j = 0; j < p.n_k; ++j) pos[size_t(j)] = p.kpos(j);
  return pos;
}

namespace {

// The kernel shape: the device's choice, or `config` once checked against the device.
KernelConfig checked_config(const Context& ctx, const Problem& p, const KernelConfig* config) {
  KernelConfig c;
  choose_kernel_config(ctx, p.d, &c, nullptr);
  if (!config) return c;
  c = *config;
  const bool pow2_lanes = c.lanes == 1 || c.lanes == 2 || c.lanes == 4 || c.lanes == 8;
  require(
      pow2_lanes && c.lanes <= int(ctx.subgroup_size()) && c.d_padded >= p.d &&
          c.d_padded % (4 * c.lanes) == 0 && (c.tile == 8 || c.tile == 16 || c.tile == 32) &&
          c.rows > 0 && c.rows * c.lanes <= int(ctx.limits().maxComputeWorkGroupInvocations) &&
          size_t(2 * c.tile * c.d_padded + c.tile) * 4 <= ctx.limits().maxComputeSharedMemorySize &&
          c.keys_per_dispatch >= 0,
      ErrorCode::InvalidArgument, "vulkan: kernel configuration does not fit the device");
  return c;
}

// The shader for the layout's form (lines, indices or ranges), specialised to the kernel shape,
// the score modifiers and the normaliser.
const ComputePipeline& attention_pipeline(Context& ctx, const KernelLayout& kl,
                                          const KernelConfig& c, const std::vector<ScoreMod>& mods,
                                          const Normaliser& norm, bool per_query, Precision prec) {
  SpecConstants spec;
  spec.set(0, uint32_t(c.d_padded)).set(1, uint32_t(c.lanes)).set(2, uint32_t(c.rows));
  spec.set(3, uint32_t(c.tile)).set(15, uint32_t(c.rows * c.lanes));
  set_score_constants(spec, mods, norm);
  const bool kv16 = prec != Precision::F32;
  if (kv16) spec.set(16, prec == Precision::Bf16 ? 1u : 0u);
  const ShaderCode code = kl.lines     ? attention_lines_shader(c.unrolled, kv16)
                          : kl.indices ? attention_indices_shader(c.unrolled, kv16)
                                       : attention_ranges_shader(c.unrolled, kv16);
  const uint32_t n_buffers = per_query ? 11 : 12;
  return ctx.pipelines().get(code, n_buffers, sizeof(AttentionPush), spec);
}

// The push constants every dispatch shares (the pass and key range are set per dispatch).
AttentionPush shared_push(const Problem& p, const KernelLayout& kl, const KernelConfig& c,
                          bool per_query) {
  AttentionPush push{};
  push.n_q = uint32_t(p.n_q);
  push.n_k = uint32_t(p.n_k);
  push.n_heads = uint32_t(p.n_heads);
  push.group = uint32_t(p.n_heads / p.n_kv_heads);
  push.scale = p.effective_scale();
  push.log_nk = std::log(float(p.n_k));
  push.per_head_layout = kl.n_layouts > 1 ? 1 : 0;
  push.bq = uint32_t(per_query ? c.rows : kl.bq);
  push.n_qb = uint32_t(kl.n_qb);
  push.chunks = uint32_t(per_query ? 1 : (kl.bq + c.rows - 1) / c.rows);
  return push;
}

// Passes over the keys (entmax runs its threshold passes first) and the key chunks each pass is
// split into.
struct KeyChunks {
  int passes = 1;
  int chunk = 0;  // keys per dispatch
  int count = 1;
};

// Device buffers in binding order; b2 (the mask bits) only for range layouts.
struct AttentionBuffers {
  int q, k, v, o, row_stat, qpos, kpos, kend, state;
  int b0 = -1, b1 = -1, b2 = -1;
};

// The 16-bit storage of x (bf16 or f16 bit patterns, rounded to nearest even by
// kv_precision.h's functions). Throws Error(InvalidArgument) for values past f16's range.
std::vector<uint16_t> to_16bit(std::span<const float> x, Precision prec, const char* what) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (prec == Precision::Bf16) {
      out[i] = bf16_value_to_bits(round_bf16(x[i]));
    } else {
      const float r = round_fp16(x[i]);
      require(std::isfinite(r), ErrorCode::InvalidArgument,
              std::string("precision f16: ") + what + " holds " + std::to_string(x[i]) +
                  ", beyond f16's largest finite value 65504; use precision bf16 or f32");
      out[i] = f16_value_to_bits(r);
    }
  }
  return out;
}

// Uploads Q, K, V (rows zero-padded to d_padded; in 16 bits for a reduced precision), positions
// and the layout's tables, and makes the output, row-statistic and chunk-state buffers.
AttentionBuffers upload_inputs(Job& job, const Problem& p, const KernelLayout& kl,
                               const KernelConfig& c, const KeyChunks& chunks, Precision prec) {
  AttentionBuffers b{};
  std::vector<float> qs, ks, vs;
  if (prec == Precision::F32) {
    b.q = job.input(pad_rows(p.q, p.d, c.d_padded, qs));
    b.k = job.input(pad_rows(p.k, p.d, c.d_padded, ks));
    b.v = job.input(pad_rows(p.v, p.d, c.d_padded, vs));
  } else {
    b.q = job.input(to_16bit(pad_rows(p.q, p.d, c.d_padded, qs), prec, "Q"));
    b.k = job.input(to_16bit(pad_rows(p.k, p.d, c.d_padded, ks), prec, "K"));
    b.v = job.input(to_16bit(pad_rows(p.v, p.d, c.d_padded, vs), prec, "V"));
  }
  const size_t rows = size_t(p.n_heads) * p.n_q;
  b.o = job.buffer(rows * c.d_padded * sizeof(float));
  b.row_stat = job.buffer(rows * sizeof(float));
  b.qpos = job.input(query_positions(p));
  b.kpos = job.input(key_positions(p));
  b.kend = job.input(kl.kend);
  // The row state carried between key chunks (a placeholder when there is one chunk).
  b.state = job.buffer(chunks.count > 1 ? rows * kStateFloats * sizeof(float) : 16);
  if (kl.lines) {
    b.b0 = job.input(kl.line_ptr);
    b.b1 = job.input(kl.line_data);
  } else if (kl.indices) {
    b.b0 = job.input(kl.idx_ptr);
    b.b1 = job.input(kl.idx);
  } else {
    b.b0 = job.input(kl.range_ptr);
    b.b1 = job.input(kl.ranges);
    b.b2 = job.input(kl.mask_bits);
  }
  return b;
}

// Records the dispatches: each pass over the keys becomes one dispatch per chunk, the row state
// carried in `state` and O between them; with a single chunk one dispatch runs every pass.
void dispatch_passes(Job& job, const ComputePipeline& pipeline, const AttentionBuffers& b,
                     AttentionPush push, bool per_query, uint32_t groups_x, const Problem& p,
                     const KeyChunks& chunks) {
  const auto dispatch = [&]() {
    if (per_query)
      job.dispatch(pipeline,
                   {b.q, b.k, b.v, b.o, b.row_stat, b.qpos, b.kpos, b.kend, b.state, b.b0, b.b1},
                   &push, sizeof push, groups_x, uint32_t(p.n_heads));
    else
      job.dispatch(
          pipeline,
          {b.q, b.k, b.v, b.o, b.row_stat, b.qpos, b.kpos, b.kend, b.state, b.b0, b.b1, b.b2},
          &push, sizeof push, groups_x, uint32_t(p.n_heads));
  };
  if (chunks.count == 1) {
    push.pass_begin = 0;
    push.pass_end = uint32_t(chunks.passes);
    push.key_begin = 0;
    push.key_end = uint32_t(p.n_k);
    push.flags = kFlagFirst | kFlagLast;
    dispatch();
    return;
  }
  for (int pass = 0; pass < chunks.passes; ++pass)
    for (int ch = 0; ch < chunks.count; ++ch) {
      push.pass_begin = uint32_t(pass);
      push.pass_end = uint32_t(pass + 1);
      push.key_begin = uint32_t(ch * chunks.chunk);
      push.key_end = uint32_t(std::min(p.n_k, (ch + 1) * chunks.chunk));
      push.flags =
          (pass == 0 && ch == 0 ? kFlagFirst : 0) | (ch + 1 == chunks.count ? kFlagLast : 0);
      if (pass > 0 || ch > 0) job.compute_barrier();
      dispatch();
    }
}

// Runs the job and reads O (padding dropped: f32 [H, n_q, d]) and the row statistics back.
AttentionOutput run_and_read_back(Job& job, const AttentionBuffers& b, const Problem& p,
                                  const KernelConfig& c) {
  const size_t rows = size_t(p.n_heads) * p.n_q;
  const size_t o_floats = rows * c.d_padded;
  std::vector<float> o_padded(o_floats);
  AttentionOutput out;
  out.row_stat.resize(rows);
  job.read_back(b.o, o_padded.data(), o_floats * sizeof(float));
  job.read_back(b.row_stat, out.row_stat.data(), out.row_stat.size() * sizeof(float));
  out.seconds = job.run();
  if (c.d_padded == p.d) {
    out.o = std::move(o_padded);
  } else {
    out.o.resize(rows * p.d);
    for (size_t r = 0; r < rows; ++r)
      std::copy(o_padded.begin() + r * c.d_padded, o_padded.begin() + r * c.d_padded + p.d,
                out.o.begin() + r * p.d);
  }
  return out;
}

}  // namespace

AttentionOutput run_attention(Context& ctx, const Problem& p, const Layout& layout,
                              const std::vector<ScoreMod>& mods, const Normaliser& norm,
                              const KernelConfig* config, Precision prec) {
  std::string why = attention_unsupported(ctx, p, mods, norm);
  if (!why.empty()) throw Error(ErrorCode::Unsupported, "vulkan: " + why);
  const KernelConfig c = checked_config(ctx, p, config);
  const KernelLayout kl = make_kernel_layout(p, layout, c.rows, -1, /*keep_lines=*/true);
  const bool per_query = kl.indices || kl.lines;  // a workgroup per ROWS queries, 11 buffers
  const ComputePipeline& pipeline = attention_pipeline(ctx, kl, c, mods, norm, per_query, prec);
  const AttentionPush push = shared_push(p, kl, c, per_query);
  const uint32_t groups_x =
      per_query ? uint32_t((p.n_q + c.rows - 1) / c.rows) : uint32_t(kl.n_qb) * push.chunks;

  const bool entmax = norm.kind == Normaliser::Kind::Entmax15;
  KeyChunks chunks;
  chunks.passes = entmax ? kEntmaxPrePasses + 1 : 1;
  chunks.chunk = c.keys_per_dispatch > 0 ? c.keys_per_dispatch : p.n_k;
  chunks.count = (p.n_k + chunks.chunk - 1) / chunks.chunk;
  Job job(ctx);
  const AttentionBuffers buffers = upload_inputs(job, p, kl, c, chunks, prec);
  dispatch_passes(job, pipeline, buffers, push, per_query, groups_x, p, chunks);
  AttentionOutput out = run_and_read_back(job, buffers, p, c);

  const double pre = entmax ? kEntmaxPrePasses : 0;
  out.flops = kl.computed_entries * (4.0 * p.d + pre * 2.0 * p.d);
  // Q, K and V in their storage, O in f32.
  const double eb = element_bytes(prec);
  out.bytes = c.d_padded * ((eb + 4.0) * p.n_heads * p.n_q + eb * kl.kv_rows_read * (2.0 + pre));
  return out;
}

}  // namespace attn::vk
