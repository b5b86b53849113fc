// The kernel for Lines layouts (vertical-slash): per tile of queries, the shared columns run as a
// dense tile over their K and V rows packed once per head, and each diagonal as one dot product
// per query against K rows that lie next to each other (query i + 1's key on a diagonal follows
// query i's). No per-query key list is built. Plain softmax and default positions only; the
// backend runs other cases as the equivalent index layout.
#pragma once
#include <atomic>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/simd.h"
#include "compute/cpu/thread_pool.h"

namespace attn::cpu::ATTN_CPU_NS {

// Fills c.o and c.row_stat for every head and query. Layout kind: Lines.
void run_lines(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel);

}  // namespace attn::cpu::ATTN_CPU_NS
