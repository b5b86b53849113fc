// The AVX-512 SGEMM behind cpu::sgemm (GotoBLAS/BLIS loop order); 16-bit B is widened to f32
// as it is packed. B is packed in KC x NC
// blocks of 32-column micro-panels [KC][32], A in MC x KC blocks of 12-row micro-panels
// [KC][12]; the micro-kernel keeps a 12 x 32 tile of C in 24 zmm registers and does 24 FMAs per
// step of k against 2 vector loads of B and 12 broadcasts of A. Edges are zero-padded in the
// packed panels, so the kernel always runs full tiles and only the store is clipped.
// Compiled inside a target("avx512f") region unless the baseline has AVX-512 already.
#include <immintrin.h>

// GCC 12 reports the undefined first operand that its own avx512fintrin.h passes to the
// unpack/shuffle builtins as maybe-uninitialized; nothing here reads an uninitialized value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "compute/cpu/gemm.h"
#include "compute/cpu/gemm_split.h"
#include "compute/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__) && (defined(__AVX512F__) || !defined(__clang__))
#define ATTN_GEMM_AVX512 1
#endif

#ifdef ATTN_GEMM_AVX512
#ifndef __AVX512F__
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f")
#endif
#include "compute/cpu/transpose16.h"

namespace attn::cpu::gemm_avx512 {
namespace {

constexpr int MR = 12, NR = 32;
constexpr int KC = 256;   // B micro-panel 32 KiB: stays in L1 while A streams past it
constexpr int MC = 192;   // A block 192 KiB: in L2
constexpr int NC = 2048;  // B block 2 MiB per thread

struct Aligned {
  void operator()(float* p) const { std::free(p); }
};
using Buf = std::unique_ptr<float[], Aligned>;
Buf alloc(size_t n) {
  return Buf(static_cast<float*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64)));
}

// 16 (or 1) elements of B from element index `i`, as f32: bf16 is the high half of an f32,
// f16 is widened by vcvtph2ps; both exact.
template <ElemType T>
inline __m512 load16(const void* b, size_t i) {
  if constexpr (T == ElemType::F32) {
    return _mm512_loadu_ps(static_cast<const float*>(b) + i);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(b) + i));
    if constexpr (T == ElemType::Bf16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}
template <ElemType T>
inline float load1(const void* b, size_t i) {
  if constexpr (T == ElemType::F32) {
    return static_cast<const float*>(b)[i];
  } else {
    const uint16_t h = static_cast<const uint16_t*>(b)[i];
    if constexpr (T == ElemType::Bf16) {
      const uint32_t u = uint32_t(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    } else {
      return _cvtsh_ss(h);
    }
  }
}

// B rows [p0, p0+kc) x columns [j0, j0+nc) -> f32 micro-panels [nc/NR][kc][NR], zero padded.
template <ElemType T>
void pack_b(const GemmArgs& g, int p0, int kc, int j0, int nc, float* dst) {
  for (int jp = 0; jp < nc; jp += NR) {
    const int w = std::min(NR, nc - jp);
    float* d = dst + size_t(jp) * kc;
    if (!g.b_nk) {
      for (int p = 0; p < kc; ++p) {
        const size_t s = size_t(p0 + p) * g.ldb + j0 + jp;
        float* r = d + size_t(p) * NR;
        if (w == NR) {
          _mm512_store_ps(r, load16<T>(g.b, s));
          _mm512_store_ps(r + 16, load16<T>(g.b, s + 16));
        } else {
          for (int j = 0; j < NR; ++j) r[j] = j < w ? load1<T>(g.b, s + j) : 0.0f;
        }
      }
    } else {
      // B is [n, k]: column j of the panel is row j0+jp+j of the stored matrix. Whole 16 x 16
      // blocks go through registers; the ragged rest element by element.
      for (int half = 0; half < 2; ++half) {
        const int r0 = half * 16, rows = std::clamp(w - r0, 0, 16);
        int p = 0;
        if (rows == 16) {
          for (; p + 16 <= kc; p += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; ++i)
              r[i] = load16<T>(g.b, size_t(j0 + jp + r0 + i) * g.ldb + p0 + p);
            transpose16(r);
            for (int q = 0; q < 16; ++q) _mm512_store_ps(d + size_t(p + q) * NR + r0, r[q]);
          }
        }
        for (int j = r0; j < r0 + 16; ++j) {
          const size_t s = size_t(j0 + jp + j) * g.ldb + p0;
          for (int pp = p; pp < kc; ++pp)
            d[size_t(pp) * NR + j] = j < w ? load1<T>(g.b, s + pp) : 0.0f;
        }
      }
    }
  }
}

using PackB = void (*)(const GemmArgs&, int, int, int, int, float*);
PackB pack_b_for(ElemType t) {
  switch (t) {
    case ElemType::Bf16:
      return pack_b<ElemType::Bf16>;
    case ElemType::F16:
      return pack_b<ElemType::F16>;
    default:
      return pack_b<ElemType::F32>;
  }
}

// A rows [i0, i0+mc) x columns [p0, p0+kc) -> micro-panels [mc/MR][kc][MR], zero padded.
void pack_a(const GemmArgs& g, int i0, int mc, int p0, int kc, float* dst) {
  for (int ip = 0; ip < mc; ip += MR) {
    const int h = std::min(MR, mc - ip);
    float* d = dst + size_t(ip) * kc;
    for (int i = 0; i < MR; ++i) {
      if (i < h) {
        const float* s = g.a + size_t(i0 + ip + i) * g.lda + p0;
        for (int p = 0; p < kc; ++p) d[size_t(p) * MR + i] = s[p];
      } else {
        for (int p = 0; p < kc; ++p) d[size_t(p) * MR + i] = 0.0f;
      }
    }
  }
}

// C tile (h x w of the 12 x 32 computed) = or += A panel . B panel (+ bias on the first pass).
void micro_kernel(int kc, const float* __restrict a, const float* __restrict b, float* c, int ldc,
                  int h, int w, bool first, const float* bias) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += NR;
  }
  if (first && bias) {
    __m512 bias0, bias1;
    if (w == NR) {
      bias0 = _mm512_loadu_ps(bias);
      bias1 = _mm512_loadu_ps(bias + 16);
    } else {
      alignas(64) float t[NR] = {};
      for (int j = 0; j < w; ++j) t[j] = bias[j];
      bias0 = _mm512_load_ps(t);
      bias1 = _mm512_load_ps(t + 16);
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm512_add_ps(acc[i][0], bias0);
      acc[i][1] = _mm512_add_ps(acc[i][1], bias1);
    }
  }
  const __mmask16 m0 = w >= 16 ? 0xffff : __mmask16((1u << w) - 1);
  const __mmask16 m1 = w >= NR ? 0xffff : w <= 16 ? 0 : __mmask16((1u << (w - 16)) - 1);
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    if (i >= h) break;
    float* r = c + size_t(i) * ldc;
    __m512 v0 = acc[i][0], v1 = acc[i][1];
    if (!first) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, r));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, r + 16));
    }
    _mm512_mask_storeu_ps(r, m0, v0);
    _mm512_mask_storeu_ps(r + 16, m1, v1);
  }
}

// Columns [n0, n1) and rows [m0, m1) of C.
void gemm_block(const GemmArgs& g, int m0, int m1, int n0, int n1, float* bp, float* ap) {
  const PackB pack_b = pack_b_for(g.b_type);
  for (int jc = n0; jc < n1; jc += NC) {
    const int nc = std::min(NC, n1 - jc);
    for (int pc = 0; pc < g.k; pc += KC) {
      const int kc = std::min(KC, g.k - pc);
      const bool first = pc == 0;
      pack_b(g, pc, kc, jc, nc, bp);
      for (int ic = m0; ic < m1; ic += MC) {
        const int mc = std::min(MC, m1 - ic);
        pack_a(g, ic, mc, pc, kc, ap);
        for (int jr = 0; jr < nc; jr += NR) {
          const int w = std::min(NR, nc - jr);
          const float* bias = g.bias ? g.bias + jc + jr : nullptr;
          for (int ir = 0; ir < mc; ir += MR) {
            micro_kernel(kc, ap + size_t(ir) * kc, bp + size_t(jr) * kc,
                         g.c + size_t(ic + ir) * g.ldc + jc + jr, g.ldc, std::min(MR, mc - ir), w,
                         first, bias);
          }
        }
      }
    }
  }
}

}  // namespace

void run(const GemmArgs& g, int threads) {
  gemm_split(g, threads, MR, NR, [&](int m0, int m1, int n0, int n1) {
    // Packing buffers live as long as the pool thread: a forward pass makes ~50 calls, and
    // fresh 2 MiB blocks would be page-faulted in every time.
    thread_local Buf bp = alloc(size_t(KC) * NC), ap = alloc(size_t(MC) * KC);
    gemm_block(g, m0, m1, n0, n1, bp.get(), ap.get());
  });
}

}  // namespace attn::cpu::gemm_avx512

#ifndef __AVX512F__
#pragma GCC pop_options
#endif
#endif  // ATTN_GEMM_AVX512

namespace attn::cpu {

bool gemm_avx512_built() {
#ifdef ATTN_GEMM_AVX512
  return true;
#else
  return false;
#endif
}

void gemm_avx512_run(const GemmArgs& g, int threads) {
#ifdef ATTN_GEMM_AVX512
  gemm_avx512::run(g, threads);
#else
  (void)g;
  (void)threads;
#endif
}

}  // namespace attn::cpu
