// Dynamic selectors on the GPU (Backend::select of the vulkan backend): the layouts of
// `topk(k)` and `block_topk(block, k)` built from scores computed on the device.
//  - top-k: every visible q.k score (f32) on the GPU, a per-row radix select and an ordered
//    compaction on the GPU (ties to the lower key index): the index layout the CPU selector
//    builds, up to f32 rounding of near-ties. Rows are processed in chunks whose scores fit a
//    bounded scratch buffer.
//  - block top-k: mean-pooled query blocks x mean-pooled key blocks scored on the GPU; the k best
//    blocks per query block (tiny) are picked on the host as the CPU selector does.
// Both handle causal and bidirectional problems, GQA, explicit positions and n_q != n_k, and
// report the flops the CPU selectors count and the GPU timestamp time of their dispatches.
#pragma once
#include <cstddef>
#include <string>

#include "compute/layout.h"
#include "compute/problem.h"
#include "compute/variant.h"

namespace attn::vk {

class Context;

// Why the GPU top-k / block top-k selector cannot run p on this device; empty when it can.
std::string topk_select_unsupported(const Context& ctx, const Problem& p, int k);
std::string block_topk_select_unsupported(const Context& ctx, const Problem& p, int block);

// Overrides of the top-k selector's shape (tests run the GPU shape on lavapipe with them).
struct TopkSelectOptions {
  size_t scratch_bytes = 0;  // bound on one chunk's score buffer; 0: 128 MiB (small: many chunks)
  int invocations = 0;       // select workgroup, a power of two in [8, 256]; 0: device default
};

// Index layout keeping each query's min(k, visible) best keys; `stats` gets flops and the GPU
// time. Throws Error(InvalidArgument) for k < 0 or bad options, Error(Unsupported) for what
// topk_select_unsupported() rejects, Error(Device) on Vulkan failures.
Layout select_topk(Context& ctx, const Problem& p, int k, SelectStats* stats,
                   const TopkSelectOptions& options = {});

// Block layout of block_topk(block, k): per query block its current key block plus the k best
// other visible ones. `stats` gets flops and the GPU time plus the host's top-k time.
Layout select_block_topk(Context& ctx, const Problem& p, int block, int k, SelectStats* stats);

}  // namespace attn::vk
