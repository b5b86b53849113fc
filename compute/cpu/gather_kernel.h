// The gather kernel for Indices layouts: each query computes only its listed keys (K and V rows
// gathered), with an online softmax over chunks of its list, or a row buffer for entmax and
// for selective attention (whose rows then run in order per head). Streamed rows go in tiles
// that walk the keys in L2-sized ranges, so scattered lists share each fetched K and V row.
#pragma once
#include <atomic>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/simd.h"
#include "compute/cpu/thread_pool.h"

namespace attn::cpu::ATTN_CPU_NS {

// Fills c.o and c.row_stat for every head and query (selective too). Layout kind: Indices.
void run_gather(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel);

}  // namespace attn::cpu::ATTN_CPU_NS
