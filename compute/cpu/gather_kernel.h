// The gather kernel for Indices layouts: each query computes only its listed keys (K and V rows
// gathered), with an online softmax over chunks of its list, or a row buffer for entmax.
#pragma once
#include <atomic>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/thread_pool.h"

namespace attn::cpu {

// Fills c.o and c.row_stat for every head and query. Layout kind must be Indices.
void run_gather(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel);

}  // namespace attn::cpu
