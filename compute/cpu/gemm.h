// GEMM for the model layers: C = A B (+ bias), A and C f32, B either row-major [k, n] (GPT-2's
// Conv1D weights) or row-major [n, k] (nn.Linear weights, used transposed), read in place from
// the memory-mapped checkpoint in the dtype it is stored in (f32, bf16 or f16: no f32 copy of a
// 16-bit checkpoint is ever made). Paths, picked at run time per call:
//  - amx:    bf16 B on CPUs with AMX-BF16 (A rounded to bf16, products summed in f32, as a
//            BF16 model computes); ~15x the f32 FMA rate per core on Sapphire Rapids.
//  - dpbf16: bf16 B on CPUs with AVX512-BF16 and no usable AMX (AMD Zen 4 and 5, Cooper Lake):
//            vdpbf16ps on packed bf16 pairs, the same arithmetic as amx (A rounded to bf16,
//            products summed in f32). Measured on Zen 5, vdpbf16ps zmm issues 2 per cycle, as
//            vfmadd231ps does, and does twice its multiply-adds: a 512 x 4096 x 4096 layer runs
//            ~2x the avx512 path's f32 rate. (On Sapphire Rapids it issues once per two cycles,
//            half the FMA rate, so it would lose to widening there; AMX comes first on those
//            CPUs.)
//  - avx512: packed panels and a 12x32 register tile; 16-bit B widened to f32 while packing, so
//            the result is the exact f32 product of the stored values.
//  - eigen:  the portable path (any x86-64-v3): f32 B is left to the caller's Eigen product
//            (sgemm returns false); 16-bit B is widened to f32 in column blocks and run by Eigen.
// So bf16 B takes amx, then dpbf16, then avx512; f16 B is always widened exactly (avx512 or
// eigen). ATTNSCOPE_GEMM=amx|dpbf16|avx512|eigen forces a path (one the CPU lacks falls back to
// the next; "avx512" gives the exact widening for bf16 B too).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace attn::cpu {

enum class ElemType : uint8_t { F32, Bf16, F16 };
const char* elem_type_name(ElemType t);  // "f32", "bf16", "f16"
size_t elem_size(ElemType t);

struct GemmArgs {
  int m = 0, n = 0, k = 0;
  const float* a = nullptr;  // f32 [m, k], row stride lda
  int lda = 0;
  // [k, n] (row stride ldb) or, if b_nk, [n, k] (row stride ldb), elements of b_type.
  const void* b = nullptr;
  ElemType b_type = ElemType::F32;
  int ldb = 0;
  bool b_nk = false;
  const float* bias = nullptr;  // f32 [n], or null
  float* c = nullptr;           // f32 [m, n], row stride ldc
  int ldc = 0;
  // Multiply in bf16 (f32 and bf16 B; f16 B is always widened exactly): A and B rounded to
  // bf16 (nearest even), products summed in f32, as
  // torch.set_float32_matmul_precision("medium") does. On the amx and dpbf16 paths f32 B is
  // rounded while packed (no copy); elsewhere rounded copies give the same products, with no
  // speed gained.
  bool round_bf16 = false;
  // B is a weight matrix, unchanged while a GemmPackScope lives: that scope may keep its packed
  // panels by address. Leave it false for activations, whose buffers are reused.
  bool b_weights = false;
};

// Computes C = A B (+ bias) on up to `threads` threads (0 = all). Returns false, touching
// nothing, only for f32 B on a CPU without AVX-512 (the caller then uses Eigen); 16-bit B is
// always computed.
bool sgemm(const GemmArgs& g, int threads);

// While it lives, the amx and dpbf16 paths keep, for GEMMs called on this thread, the packed
// bf16 panels of every B marked b_weights they multiply (up to `budget_bytes`; B past it is
// packed per call as usual), so a pass repeated over the same weights (integrated gradients'
// steps, occlusion's passes) packs each matrix once instead of on every call: at a few hundred
// rows the packing of f32 weights costs nearly what the tile products do on AMX, and a fifth of
// the dpbf16 kernel's time. B must not change while the scope lives. The exact paths (avx512,
// eigen) pack per call as before.
class GemmPackScope {
 public:
  explicit GemmPackScope(size_t budget_bytes);
  ~GemmPackScope();
  GemmPackScope(const GemmPackScope&) = delete;
  GemmPackScope& operator=(const GemmPackScope&) = delete;
  size_t bytes() const;  // packed bytes kept

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
  void* saved_ = nullptr;  // the enclosing scope's cache
};

// The path sgemm() takes for B of type `t` here and now: "amx", "dpbf16", "avx512", "eigen"
// (with round_bf16, f32 B takes bf16's path). "amx" and "dpbf16" round A to bf16.
const char* gemm_path(ElemType t, bool round_bf16 = false);
// "avx512" when sgemm() runs its own kernel for f32 B, else "".
const char* sgemm_isa();

// dst[0, n) = the values src[0, n) of type `t` hold, as f32 (exact: every bf16 and f16 value is
// an f32 value).
void widen(ElemType t, const void* src, size_t n, float* dst);
// x f32 -> bf16 bits, round to nearest even (NaN stays NaN).
uint16_t bf16_bits(float x);

}  // namespace attn::cpu
