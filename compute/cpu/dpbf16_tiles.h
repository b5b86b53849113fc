// The bf16 tile products of amx_tiles.h on AVX512-BF16 vector instructions (vdpbf16ps), for
// CPUs that have them without AMX (AMD Zen 4 and 5, Intel Cooper Lake). Same layouts, same
// rounding (bf16 inputs as stored, products summed in f32, probabilities rounded to bf16 before
// they meet V), so the flash kernel and the key lists' dense tiles run either unit unchanged.
// On Zen 5 vdpbf16ps issues as often as vfmadd231ps and does twice its multiply-adds.
// Callers ask amx::has_avx512_bf16() first; other compilers and CPUs get empty functions.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attn::cpu::dpbf16 {

// amx::qk's contract, computing exactly rows j < nj (nothing is read past K's last row). With
// `colmax` (f32 [round16(cols)]), also colmax[i] = max(colmax[i], max_j St[j][i]) from the
// registers: the softmax's max pass then reads no scores.
void qk(const uint16_t* k, size_t ldk, int nj, const uint32_t* qp, int ldq, int cols, int d,
        float qscale, float* st, int lds, float* colmax = nullptr);

// amx::pv's contract. V^T is read for keys j < round2(nj); an odd nj's last pair takes only its
// first key, so what follows the chunk in V^T never reaches O (not even 0 x NaN).
void pv(const float* st, int lds, int nj, int cols, const uint16_t* vt, size_t ldvt, int dv,
        float* ot, int ldo, const float* alpha, bool init, uint32_t* pp, int ldp);

// P as bf16 pairs of keys per query, the B operand of both units' second product:
// pp[r][i] = bf16(P[2r][i]) | bf16(P[2r + 1][i]) << 16 for r < pairs, i < round16(cols), rows of
// P past nj read as 0 (st: f32 [nj][lds], rounded to nearest even).
void pack_pairs(const float* st, int lds, int nj, int cols, int pairs, uint32_t* pp, int ldp);

}  // namespace attn::cpu::dpbf16
