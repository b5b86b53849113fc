// A 16 x 16 transpose of 32-bit elements held in 16 zmm registers, shared by the GEMM packers
// (f32 panels, and bf16 pairs viewed as 32-bit lanes). Include it only inside an AVX-512
// target region (or a build whose baseline has AVX-512).
#pragma once
#include <immintrin.h>

namespace attn::cpu {

// In-register transpose: r[i][j] -> r[j][i].
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16], v[16];
  for (int i = 0; i < 8; ++i) {  // interleave pairs of rows
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // 4-float groups
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 2; ++i) {  // 128-bit lanes within 8-row halves
    for (int j = 0; j < 4; ++j) {
      v[8 * i + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0x88);
      v[8 * i + 4 + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0xDD);
    }
  }
  for (int j = 0; j < 8; ++j) {  // 128-bit lanes across the halves
    r[j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0xDD);
  }
}

// The same for integer lanes (bf16 pairs).
inline void transpose16(__m512i r[16]) {
  __m512 f[16];
  for (int i = 0; i < 16; ++i) f[i] = _mm512_castsi512_ps(r[i]);
  transpose16(f);
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(f[i]);
}

}  // namespace attn::cpu
