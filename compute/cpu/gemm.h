// Single-precision GEMM for the model layers: C = A B (+ bias), with B either row-major [k, n]
// (GPT-2's Conv1D weights) or row-major [n, k] (nn.Linear weights, used transposed), read in
// place from the memory-mapped checkpoint. An AVX-512 kernel (packed panels, 12x32 register
// tile) runs when the CPU has AVX-512, whatever the build's baseline; otherwise sgemm() returns
// false and the caller uses Eigen.
#pragma once

namespace attn::cpu {

struct GemmArgs {
  int m = 0, n = 0, k = 0;
  const float* a = nullptr;  // f32 [m, k], row stride lda
  int lda = 0;
  const float* b = nullptr;  // f32 [k, n] (row stride ldb) or, if b_nk, f32 [n, k] (row stride ldb)
  int ldb = 0;
  bool b_nk = false;
  const float* bias = nullptr;  // f32 [n], or null
  float* c = nullptr;           // f32 [m, n], row stride ldc
  int ldc = 0;
};

// Computes C = A B (+ bias) on up to `threads` threads (0 = all). Returns false, touching
// nothing, when this CPU has no fast kernel. ATTNSCOPE_GEMM=eigen turns the fast kernel off.
bool sgemm(const GemmArgs& g, int threads);

// "avx512" when sgemm() runs its kernel here, else "".
const char* sgemm_isa();

}  // namespace attn::cpu
