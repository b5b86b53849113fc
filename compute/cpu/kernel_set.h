// The kernels as a set of entry points per instruction set, chosen at run time: the build's
// baseline (x86-64-v3 = AVX2 + FMA for packaged builds) and, when this binary carries it and the
// CPU and OS support it, an AVX-512 build of the same source (isa_avx512.cpp), and that build
// again with bf16 tile products for bf16 storage: AMX tiles (amx_tiles.h) where the CPU has
// AMX-BF16, vdpbf16ps (dpbf16_tiles.h) where it has AVX512-BF16.
#pragma once
#include <atomic>
#include <vector>

#include "compute/cpu/kernel_context.h"
#include "compute/cpu/thread_pool.h"

namespace attn::cpu {

using KernelFn = void (*)(KernelContext&, ThreadPool&, const std::atomic<bool>*);
// Fills the context's 16-bit storage; the last argument converts floats to bf16 in hardware
// (null: in software).
using ConvertFn = void (*)(KernelContext&, ThreadPool&, void (*)(const float*, uint16_t*, size_t));

struct KernelSet {
  const char* isa = "";             // "avx512amx", "avx512bf16", "avx512", "avx2", "generic"
  int width = 1;                    // floats per vector: KernelContext pads V rows and O to it
  KernelFn flash = nullptr;         // Dense and Blocks layouts
  KernelFn gather = nullptr;        // Indices layouts
  KernelFn lines = nullptr;         // Lines layouts (softmax, default positions)
  KernelFn selective = nullptr;     // selective attention, any layout
  ConvertFn convert = nullptr;      // Q, K, V into 16-bit storage (precision bf16, f16)
  TileUnit tiles = TileUnit::None;  // where bf16 storage runs its tile products
};

// The kernels compiled for the build's baseline instruction set.
const KernelSet& baseline_kernels();

// The AVX-512 kernels when this binary has a separate build of them and this CPU and OS run
// AVX-512 (F, VL, BW, DQ); null otherwise (also when the baseline is AVX-512 already).
const KernelSet* avx512_kernels();

// The AVX-512 kernels with AMX tiles for bf16 storage, when avx512_kernels() runs here and the
// CPU has AMX-BF16 that the OS grants this process; null otherwise.
const KernelSet* avx512_amx_kernels();

// The AVX-512 kernels with bf16 tile products on vdpbf16ps, when avx512_kernels() runs here and
// the CPU has AVX512-BF16 (with or without AMX); null otherwise.
const KernelSet* avx512_bf16_kernels();

// Every set that runs here, best first.
std::vector<const KernelSet*> available_kernel_sets();

// The best set, unless env ATTNSCOPE_CPU_ISA names another available one ("avx512", "avx2",
// "generic"; "avx512amx", then "avx512bf16", are the best where they run).
const KernelSet& best_kernels();

}  // namespace attn::cpu
