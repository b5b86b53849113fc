// The tiled kernel for Dense and Blocks layouts (FlashAttention-style): work items are
// (head, query tile); each streams over the key runs its layout keeps, scoring a query tile x
// key chunk at a time, with an online softmax (or the elementwise normalisers) so no N x N
// buffer exists. Entmax buffers one query tile's kept scores (kBQ x n_k) for its threshold.
#pragma once
#include <atomic>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/simd.h"
#include "compute/cpu/thread_pool.h"

namespace attn::cpu::ATTN_CPU_NS {

// Fills c.o and c.row_stat for every head and query. Layout kind must be Dense or Blocks.
void run_flash(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel);

}  // namespace attn::cpu::ATTN_CPU_NS
