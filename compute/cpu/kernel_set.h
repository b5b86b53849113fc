// The kernels as a set of entry points per instruction set, chosen at run time: the build's
// baseline (x86-64-v3 = AVX2 + FMA for packaged builds) and, when this binary carries it and the
// CPU and OS support it, an AVX-512 build of the same source (isa_avx512.cpp).
#pragma once
#include <atomic>
#include <vector>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/thread_pool.h"

namespace attn::cpu {

using KernelFn = void (*)(KernelContext&, ThreadPool&, const std::atomic<bool>*);

struct KernelSet {
  const char* isa = "";          // "avx512", "avx2", "generic"
  int width = 1;                 // floats per vector: KernelContext pads V rows and O to it
  KernelFn flash = nullptr;      // Dense and Blocks layouts
  KernelFn gather = nullptr;     // Indices layouts
  KernelFn lines = nullptr;      // Lines layouts (softmax, default positions)
  KernelFn selective = nullptr;  // selective attention, any layout
};

// The kernels compiled for the build's baseline instruction set.
const KernelSet& baseline_kernels();

// The AVX-512 kernels when this binary has a separate build of them and this CPU and OS run
// AVX-512 (F, VL, BW, DQ); null otherwise (also when the baseline is AVX-512 already).
const KernelSet* avx512_kernels();

// Every set that runs here, best first.
std::vector<const KernelSet*> available_kernel_sets();

// The best set, unless env ATTNSCOPE_CPU_ISA names another available one ("avx2", "generic").
const KernelSet& best_kernels();

}  // namespace attn::cpu
