// The cpu kernels again, compiled for AVX-512 (16-float vectors, 32 registers) inside a
// target("avx512...") region, so packaged x86-64-v3 builds run twice as wide on CPUs that have
// it. The kernel sources are included whole (a unity build of them); everything they define
// lives in namespace attn::cpu::isa_avx512. Standard headers come first, outside the region, so
// library templates keep the baseline instruction set (no AVX-512 code can leak into shared
// symbols). Nothing is built when the baseline is AVX-512 already or the compiler is not GCC.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "compute/cpu/amx_tiles.h"
#include "compute/cpu/bf16_tiles.h"
#include "compute/cpu/dpbf16_tiles.h"
#include "compute/cpu/huge_pages.h"
#include "compute/cpu/kernel_context.h"
#include "compute/cpu/kernel_set.h"
#include "compute/cpu/thread_pool.h"
#include "compute/error.h"
#include "compute/half_bits.h"
#include "compute/kv/kv_precision.h"
#include "compute/layout.h"
#include "compute/mask.h"
#include "compute/precision.h"
#include "compute/problem.h"
#include "compute/score_mod.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__AVX512F__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq")
#define ATTN_CPU_ISA_AVX512 1

#include "compute/cpu/flash_kernel.cpp"
#include "compute/cpu/gather_kernel.cpp"
#include "compute/cpu/half_rows.cpp"
#include "compute/cpu/lines_kernel.cpp"
#include "compute/cpu/score_tile.cpp"
#include "compute/cpu/selective_kernel.cpp"
#include "compute/cpu/tile_plan.cpp"

#pragma GCC pop_options

namespace attn::cpu {
const KernelSet* avx512_kernel_set_if_built() {
  static const KernelSet k{"avx512",
                           isa_avx512::kVW,
                           &isa_avx512::run_flash,
                           &isa_avx512::run_gather,
                           &isa_avx512::run_lines,
                           &isa_avx512::run_selective,
                           &isa_avx512::convert_inputs};
  return &k;
}
}  // namespace attn::cpu

#else

namespace attn::cpu {
const KernelSet* avx512_kernel_set_if_built() {
  return nullptr;
}
}  // namespace attn::cpu

#endif
