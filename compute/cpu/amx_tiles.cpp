#include "compute/cpu/amx_tiles.h"

#include <cstring>

#include "compute/cpu/dpbf16_tiles.h"

// Built for GCC on x86-64 Linux (tile data needs the kernel's permission); elsewhere usable()
// and has_avx512_bf16() are false and nothing calls the rest.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,amx-tile,amx-bf16")

namespace attn::cpu::amx {

namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

bool cpu_has(unsigned leaf, unsigned sub, int reg, int bit) {
  unsigned r[4] = {};
  if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}

bool avx512_ok() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

bool has_avx512_bf16() {
  static const bool yes = avx512_ok() && cpu_has(7, 1, 0, 5);  // CPUID.(7,1):EAX[5]
  return yes;
}

bool usable() {
  static const bool yes = [] {
    // CPUID.(7,0):EDX[22] AMX-BF16, EDX[24] AMX-TILE.
    if (!has_avx512_bf16() || !cpu_has(7, 0, 3, 22) || !cpu_has(7, 0, 3, 24)) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return yes;
}

void begin() {
  // Static: GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes, so the stores to a
  // local configuration past them could be dropped.
  static const TileConfig cfg = [] {
    TileConfig c;
    for (int t = 0; t < 8; ++t) {
      c.colsb[t] = 64;
      c.rows[t] = 16;
    }
    return c;
  }();
  _tile_loadconfig(&cfg);
}

void end() {
  _tile_release();
}

void qk(const uint16_t* k, size_t ldk, int nj, const uint32_t* qp, int ldq, int cols, int d,
        float qscale, float* st, int lds) {
  const int jb = (nj + 15) / 16, qb = (cols + 15) / 16;
  const size_t sk = ldk * 2, sq = size_t(ldq) * 4, ss = size_t(lds) * 4;
  // 2 x 2 blocks of 16 x 16 score tiles (tiles 0-3), keys in 4-5, query pairs in 6-7.
  for (int j0 = 0; j0 < jb; j0 += 2) {
    for (int q0 = 0; q0 < qb; q0 += 2) {
      const bool tj = j0 + 1 < jb, tq = q0 + 1 < qb;
      const uint16_t* ka = k + size_t(j0) * 16 * ldk;
      const uint16_t* kb = ka + 16 * ldk;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int k0 = 0; k0 < d; k0 += 32) {
        const uint32_t* qa = qp + size_t(k0 / 2) * ldq + q0 * 16;
        _tile_loadd(4, ka + k0, sk);
        _tile_loadd(6, qa, sq);
        _tile_dpbf16ps(0, 4, 6);
        if (tq) {
          _tile_loadd(7, qa + 16, sq);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (tj) {
          _tile_loadd(5, kb + k0, sk);
          _tile_dpbf16ps(2, 5, 6);
          if (tq) _tile_dpbf16ps(3, 5, 7);
        }
      }
      float* s = st + size_t(j0) * 16 * lds + q0 * 16;
      _tile_stored(0, s, ss);
      if (tq) _tile_stored(1, s + 16, ss);
      if (tj) _tile_stored(2, s + size_t(16) * lds, ss);
      if (tj && tq) _tile_stored(3, s + size_t(16) * lds + 16, ss);
    }
  }
  const __m512 scale = _mm512_set1_ps(qscale);
  for (int j = 0; j < nj; ++j)
    for (int v = 0; v < qb; ++v) {
      float* s = st + size_t(j) * lds + v * 16;
      _mm512_storeu_ps(s, _mm512_mul_ps(_mm512_loadu_ps(s), scale));
    }
}

void pv(const float* st, int lds, int nj, int cols, const uint16_t* vt, size_t ldvt, int dv,
        float* ot, int ldo, const float* alpha, bool init, uint32_t* pp, int ldp) {
  const int qb = (cols + 15) / 16, pairs = (nj + 31) / 32 * 16;
  dpbf16::pack_pairs(st, lds, nj, cols, pairs, pp, ldp);  // whole 32-key tiles, zero past nj
  if (alpha && !init)
    for (int v = 0; v < qb; ++v) {
      const __m512 a = _mm512_loadu_ps(alpha + v * 16);
      for (int c = 0; c < dv; ++c) {
        float* o = ot + size_t(c) * ldo + v * 16;
        _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_loadu_ps(o), a));
      }
    }
  const size_t sv = ldvt * 2, sp = size_t(ldp) * 4, so = size_t(ldo) * 4;
  const int cb = dv / 16;
  // 2 x 2 blocks of 16 x 16 output tiles (0-3), V^T rows in 4-5, P pairs in 6-7.
  for (int c0 = 0; c0 < cb; c0 += 2) {
    for (int q0 = 0; q0 < qb; q0 += 2) {
      const bool tc = c0 + 1 < cb, tq = q0 + 1 < qb;
      float* o = ot + size_t(c0) * 16 * ldo + q0 * 16;
      if (init) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      } else {
        _tile_loadd(0, o, so);
        if (tq) _tile_loadd(1, o + 16, so);
        if (tc) _tile_loadd(2, o + size_t(16) * ldo, so);
        if (tc && tq) _tile_loadd(3, o + size_t(16) * ldo + 16, so);
      }
      const uint16_t* va = vt + size_t(c0) * 16 * ldvt;
      const uint16_t* vb = va + 16 * ldvt;
      for (int k0 = 0; k0 < nj; k0 += 32) {
        const uint32_t* pa = pp + size_t(k0 / 2) * ldp + q0 * 16;
        _tile_loadd(4, va + k0, sv);
        _tile_loadd(6, pa, sp);
        _tile_dpbf16ps(0, 4, 6);
        if (tq) {
          _tile_loadd(7, pa + 16, sp);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (tc) {
          _tile_loadd(5, vb + k0, sv);
          _tile_dpbf16ps(2, 5, 6);
          if (tq) _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, o, so);
      if (tq) _tile_stored(1, o + 16, so);
      if (tc) _tile_stored(2, o + size_t(16) * ldo, so);
      if (tc && tq) _tile_stored(3, o + size_t(16) * ldo + 16, so);
    }
  }
}

void convert_bf16(const float* x, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        __m256i(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(out + i, m,
                             __m256i(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i))));
  }
}

}  // namespace attn::cpu::amx

#pragma GCC pop_options

#else

namespace attn::cpu::amx {
bool usable() {
  return false;
}
bool has_avx512_bf16() {
  return false;
}
void begin() {}
void end() {}
void qk(const uint16_t*, size_t, int, const uint32_t*, int, int, int, float, float*, int) {}
void pv(const float*, int, int, int, const uint16_t*, size_t, int, float*, int, const float*, bool,
        uint32_t*, int) {}
void convert_bf16(const float*, uint16_t*, size_t) {}
}  // namespace attn::cpu::amx

#endif
