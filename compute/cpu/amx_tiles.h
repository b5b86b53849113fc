// Intel AMX (advanced matrix extensions) tiles for the flash kernel's bf16 path, and the
// hardware bf16 rounding (AVX512-BF16) for converting Q, K and V. On this project's reference
// machine (a Xeon with AMX-BF16) one tile product TDPBF16PS does 16 x 16 x 32 multiply-adds:
// ~16x the f32 FMA rate, where vdpbf16ps on zmm measured 2x slower per flop than vfmadd231ps.
// Everything here is ISA-independent C++ at its interface and compiled for AMX inside; callers
// ask usable() first (CPU support and the Linux permission for tile data, asked once).
#pragma once
#include <cstddef>
#include <cstdint>

namespace attn::cpu::amx {

// True when this CPU has AMX-BF16 and the OS lets this process use tile data (Linux
// arch_prctl(ARCH_REQ_XCOMP_PERM)). False on other compilers, architectures and CPUs.
bool usable();
// True when this CPU has AVX512-BF16 (vcvtneps2bf16): convert_bf16() then runs in hardware.
bool has_avx512_bf16();

// Loads the tile configuration on the calling thread (8 tiles of 16 rows x 64 bytes); end()
// releases it. Every qk()/pv() call lies between the two on its thread.
void begin();
void end();

// St[j][i] = qscale * sum_k K[j][k] Q[i][k] for j < round16(nj), i < round16(cols), with
// k < d (d % 32 == 0). k: bf16 rows (ldk elements apart; 16 rows past each 16-row group may be
// read, so the buffer must extend 15 rows past the last key); qp: bf16 pairs of Q as u32
// [d / 2][ldq] (pair k holds dims 2k, 2k + 1 of each query column; columns past cols are zero).
void qk(const uint16_t* k, size_t ldk, int nj, const uint32_t* qp, int ldq, int cols, int d,
        float qscale, float* st, int lds);

// Ot[c][i] = alpha[i] Ot[c][i] + sum_j V^T[c][j] P[j][i] for c < dv (dv % 16 == 0), i <
// round16(cols), j < nj: P = st (f32 [nj][lds]) rounded to bf16; vt: bf16 V^T from the
// chunk's first key (row c at vt + c * ldvt; up to 31 keys past nj may be read, times P = 0).
// alpha null means 1; `init`: Ot starts from zero. pp: scratch of round32(nj) / 2 x ldp u32
// (ldp >= cols).
void pv(const float* st, int lds, int nj, int cols, const uint16_t* vt, size_t ldvt, int dv,
        float* ot, int ldo, const float* alpha, bool init, uint32_t* pp, int ldp);

// out[i] = bf16 bits of x[i] rounded to nearest even (vcvtneps2bf16; inputs below f32's normal
// range read as zero). Only where has_avx512_bf16().
void convert_bf16(const float* x, uint16_t* out, size_t n);

}  // namespace attn::cpu::amx
