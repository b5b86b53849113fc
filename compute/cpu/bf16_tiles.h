// The bf16 tile products on the unit a kernel context names (KernelContext::tiles): AMX tiles or
// vdpbf16ps, same contracts (amx_tiles.h). begin() and end() bracket a thread's products.
#pragma once
#include "compute/cpu/amx_tiles.h"
#include "compute/cpu/dpbf16_tiles.h"
#include "compute/cpu/kernel_context.h"

namespace attn::cpu::tiles {

inline void begin(const KernelContext& c) {
  if (c.tiles == TileUnit::Amx) amx::begin();
}
inline void end(const KernelContext& c) {
  if (c.tiles == TileUnit::Amx) amx::end();
}
// With `colmax`, also folds each query column's max over the chunk into colmax where the unit
// can do it from its registers (vdpbf16ps) and returns true; false: colmax is untouched.
inline bool qk(const KernelContext& c, const uint16_t* k, size_t ldk, int nj, const uint32_t* qp,
               int ldq, int cols, float qscale, float* st, int lds, float* colmax = nullptr) {
  if (c.tiles == TileUnit::Amx) {
    amx::qk(k, ldk, nj, qp, ldq, cols, c.d, qscale, st, lds);
    return false;
  }
  dpbf16::qk(k, ldk, nj, qp, ldq, cols, c.d, qscale, st, lds, colmax);
  return colmax != nullptr;
}
inline void pv(const KernelContext& c, const float* st, int lds, int nj, int cols,
               const uint16_t* vt, size_t ldvt, float* ot, int ldo, const float* alpha, bool init,
               uint32_t* pp, int ldp) {
  (c.tiles == TileUnit::Amx ? amx::pv : dpbf16::pv)(st, lds, nj, cols, vt, ldvt, c.dv, ot, ldo,
                                                    alpha, init, pp, ldp);
}

}  // namespace attn::cpu::tiles
