// How the packed-panel GEMM paths (gemm_avx512.cpp, gemm_dpbf16.cpp) share C among threads.
#pragma once
#include <functional>

#include "compute/cpu/gemm.h"

namespace attn::cpu {

// Calls block(m0, m1, n0, n1) for each part of C on up to `threads` threads (0 = all): columns
// split in whole nr-wide micro-panels while every thread gets at least two, else rows in whole
// mr-row steps as well. Each call packs its own panels.
void gemm_split(const GemmArgs& g, int threads, int mr, int nr,
                const std::function<void(int, int, int, int)>& block);

}  // namespace attn::cpu
