// Runs attention on the GPU: expands the layout (kernel_layout.h), uploads Q, K, V, dispatches
// the ranges or indices kernel specialised for the head dimension, score modifiers and
// normaliser, and reads back O and the row statistics.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "compute/layout.h"
#include "compute/precision.h"
#include "compute/problem.h"
#include "compute/result.h"
#include "compute/score_mod.h"
#include "compute/vulkan/pipeline.h"

namespace attn::vk {

class Context;

// Work split of the kernels for one head dimension on one device.
struct KernelConfig {
  int d_padded = 0;           // head dimension rounded up to a multiple of 4 * lanes (zero padding)
  int lanes = 4;              // invocations per query row
  int rows = 32;              // query rows per workgroup
  int tile = 32;              // keys per shared-memory tile
  bool unrolled = true;       // keys of a tile unrolled (GPUs) or looped (CPU devices compile fast)
  int keys_per_dispatch = 0;  // 0: all keys at once; else chunks (bounds lavapipe's loops)
};

// Kernel shape for head dimension d, or false with `why` when none fits the device.
bool choose_kernel_config(const Context& ctx, int d, KernelConfig* config, std::string* why);

// Sets the normaliser and score-modifier specialisation constants (ids 4..14).
void set_score_constants(SpecConstants& spec, const std::vector<ScoreMod>& mods,
                         const Normaliser& norm);

// Why these pieces cannot run on this device for p; empty when they can.
std::string attention_unsupported(const Context& ctx, const Problem& p,
                                  const std::vector<ScoreMod>& mods, const Normaliser& norm);

struct AttentionOutput {
  std::vector<float> o;         // f32 [H, n_q, d]
  std::vector<float> row_stat;  // f32 [H, n_q]
  double seconds = 0;           // GPU time of the attention dispatch (timestamps)
  double flops = 0;             // work the kernel did (multiply-add = 2)
  double bytes = 0;             // Q, O and the K/V rows it read
};

// The output as a Result over `layout`: shape, O, row statistics, and the kernel's time, flops
// and bytes in its stats (the caller names the backend).
Result attention_result(AttentionOutput out, const Problem& p, const Layout& layout);

// Throws Error(Unsupported) for what attention_unsupported() rejects, Error(Device) on Vulkan
// failures (a lost device marks the context lost). `config` overrides the device's kernel shape
// (e.g. to run the unrolled GPU build on lavapipe in a test); it must fit the device. `prec`:
// storage of Q, K and V in the device buffers (bf16 / f16: 16-bit, rounded on the host).
AttentionOutput run_attention(Context& ctx, const Problem& p, const Layout& layout,
                              const std::vector<ScoreMod>& mods, const Normaliser& norm,
                              const KernelConfig* config = nullptr,
                              Precision prec = Precision::F32);

// Q/K/V rows [rows, d] zero-padded to [rows, dp] (returns the input when d == dp).
std::span<const float> pad_rows(std::span<const float> x, int d, int dp,
                                std::vector<float>& storage);

// Token positions with the problem's defaults filled in.
std::vector<int32_t> query_positions(const Problem& p);
std::vector<int32_t> key_positions(const Problem& p);

}  // namespace attn::vk
