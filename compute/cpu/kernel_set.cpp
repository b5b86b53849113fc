#include "compute/cpu/kernel_set.h"

#include <cstdlib>
#include <string>

#include "compute/cpu/amx_tiles.h"
#include "compute/cpu/flash_kernel.h"
#include "compute/cpu/gather_kernel.h"
#include "compute/cpu/half_rows.h"
#include "compute/cpu/lines_kernel.h"
#include "compute/cpu/selective_kernel.h"
#include "compute/cpu/simd.h"

namespace attn::cpu {

// Defined in isa_avx512.cpp: its AVX-512 set, or null when it built none.
const KernelSet* avx512_kernel_set_if_built();

const KernelSet& baseline_kernels() {
  static const KernelSet k{ATTN_CPU_ISA_NAME,           ATTN_CPU_NS::kVW,
                           &ATTN_CPU_NS::run_flash,     &ATTN_CPU_NS::run_gather,
                           &ATTN_CPU_NS::run_lines,     &ATTN_CPU_NS::run_selective,
                           &ATTN_CPU_NS::convert_inputs};
  return k;
}

const KernelSet* avx512_amx_kernels() {
  const KernelSet* base = avx512_kernels();
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
  // Built for an AVX-512 machine (the `native` preset): the baseline set is the AVX-512 one and
  // no second copy exists, so AMX extends the baseline.
  if (!base) base = &baseline_kernels();
#endif
  if (!base || !amx::usable()) return nullptr;
  static const KernelSet k = [base] {
    KernelSet x = *base;
    x.isa = "avx512amx";
    x.tiles = TileUnit::Amx;
    return x;
  }();
  return &k;
}

const KernelSet* avx512_bf16_kernels() {
  const KernelSet* base = avx512_kernels();
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
  if (!base) base = &baseline_kernels();
#endif
  if (!base || !amx::has_avx512_bf16()) return nullptr;
  static const KernelSet k = [base] {
    KernelSet x = *base;
    x.isa = "avx512bf16";
    x.tiles = TileUnit::Dpbf16;
    return x;
  }();
  return &k;
}

const KernelSet* avx512_kernels() {
  const KernelSet* k = avx512_kernel_set_if_built();
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  // libgcc's checks include the OS enabling the AVX-512 register state (XGETBV).
  __builtin_cpu_init();
  if (k && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return k;
#endif
  return nullptr;
}

std::vector<const KernelSet*> available_kernel_sets() {
  std::vector<const KernelSet*> out;
  if (const KernelSet* k = avx512_amx_kernels()) out.push_back(k);
  if (const KernelSet* k = avx512_bf16_kernels()) out.push_back(k);
  if (const KernelSet* k = avx512_kernels()) out.push_back(k);
  out.push_back(&baseline_kernels());
  return out;
}

const KernelSet& best_kernels() {
  const std::vector<const KernelSet*> sets = available_kernel_sets();
  if (const char* want = std::getenv("ATTNSCOPE_CPU_ISA"))
    for (const KernelSet* k : sets)
      if (std::string(want) == k->isa) return *k;
  return *sets.front();
}

}  // namespace attn::cpu
