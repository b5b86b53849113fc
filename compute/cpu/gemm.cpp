#include "compute/cpu/gemm.h"

#include <cstdlib>
#include <cstring>

namespace attn::cpu {

// Defined in gemm_avx512.cpp.
bool gemm_avx512_built();
void gemm_avx512_run(const GemmArgs& g, int threads);

namespace {
bool avx512_usable() {
  if (!gemm_avx512_built()) return false;
  const char* env = std::getenv("ATTNSCOPE_GEMM");
  if (env && std::strcmp(env, "eigen") == 0) return false;
#if defined(__GNUC__) && defined(__x86_64__)
  // libgcc's check includes the OS enabling the AVX-512 register state (XGETBV).
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}
}  // namespace

const char* sgemm_isa() {
  static const bool ok = avx512_usable();
  return ok ? "avx512" : "";
}

bool sgemm(const GemmArgs& g, int threads) {
  if (!*sgemm_isa()) return false;
  if (g.m <= 0 || g.n <= 0) return true;
  if (g.k <= 0) {  // empty sum: C = bias (or 0)
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) g.c[size_t(i) * g.ldc + j] = g.bias ? g.bias[j] : 0.0f;
    return true;
  }
  gemm_avx512_run(g, threads);
  return true;
}

}  // namespace attn::cpu
