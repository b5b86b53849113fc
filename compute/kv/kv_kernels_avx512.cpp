// The kv chunk kernel (kv_kernels.cpp) again, compiled for AVX-512 inside a target("avx512...")
// region, as compute/cpu/isa_avx512.cpp does for the attention kernels: standard headers come
// first, outside the region, so library templates keep the baseline instruction set. Nothing is
// built when the baseline is AVX-512 already or the compiler is not GCC.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "compute/half_bits.h"
#include "compute/kv/kv_kernels.h"
#include "compute/kv/kv_rows.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__AVX512F__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq")
#define KV_ISA_AVX512 1

#include "compute/kv/kv_kernels.cpp"

#pragma GCC pop_options

namespace attn::kv_detail {
const Kernels* avx512_kernels_if_built() {
  return &isa_avx512::kKernels;
}
}  // namespace attn::kv_detail

#else

namespace attn::kv_detail {
const Kernels* avx512_kernels_if_built() {
  return nullptr;
}
}  // namespace attn::kv_detail

#endif
