// Selective attention (Leviathan et al. 2024): query i's logits are its scores minus, per key,
// the accumulated ReLU'd scores that earlier queries gave that key (a key never masks itself,
// and the first token is exempt); only kept entries are computed, subtracted from and
// accumulated. The accumulator makes queries depend on earlier ones, so each head is one work
// item walking its query tiles in order with an O(n_k) accumulator; a tile's kept scores are
// buffered (at most kBQ x n_k) so any normaliser can follow.
#pragma once
#include <atomic>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/simd.h"
#include "compute/cpu/thread_pool.h"

namespace attn::cpu::ATTN_CPU_NS {

// Fills c.o and c.row_stat for every head and query, for any layout kind.
void run_selective(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel);

}  // namespace attn::cpu::ATTN_CPU_NS
