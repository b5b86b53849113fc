// The AVX512-BF16 path of cpu::sgemm (vdpbf16ps), for bf16 B and for f32 B with
// GemmArgs::round_bf16, on CPUs that have AVX512-BF16 but no usable AMX (AMD Zen 4 and 5, Intel
// Cooper Lake). It computes what the AMX path computes: A rounded to bf16 (nearest even), bf16 B
// as stored (f32 B rounded to nearest even while packed), products of bf16 values summed in f32.
// Loop order and blocking as gemm_avx512.cpp (GotoBLAS/BLIS), on bf16 pairs along k:
//  - B in KC x NC blocks of 32-column micro-panels [pairs][32] u32, pair q of column j being
//    B[2q][j] | B[2q+1][j] << 16 (the layout vdpbf16ps reads: k even in the low half);
//  - A in MC x KC blocks of 12-row micro-panels [pairs][12] u32, the same pairs of one row;
//  - the micro-kernel keeps a 12 x 32 f32 tile of C in 24 zmm registers and, per pair of k,
//    loads 2 vectors of B, broadcasts 12 pairs of A and issues 24 vdpbf16ps (48 multiply-adds
//    per lane per step, twice the avx512 kernel's 24 FMAs).
// An odd k is padded with a zero, edges of m and n with zero rows and columns of the packed
// panels (masked loads), so the kernel always runs full tiles and only the store is clipped.
// Built for GCC on x86-64 (a target("avx512bf16") region); elsewhere, as under clang, the path
// is unavailable and gemm_dpbf16_usable() is false.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "compute/cpu/amx_tiles.h"
#include "compute/cpu/gemm.h"
#include "compute/cpu/gemm_split.h"
#include "compute/parallel.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ATTN_GEMM_DPBF16 1
#endif

#ifdef ATTN_GEMM_DPBF16
// GCC 12 reports the undefined first operand that its own avx512fintrin.h passes to the
// unpack/shuffle builtins as maybe-uninitialized; nothing here reads an uninitialized value.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")
#include "compute/cpu/transpose16.h"

namespace attn::cpu::gemm_dpbf16 {
namespace {

constexpr int MR = 12, NR = 32;
constexpr int KC = 512;   // k per block (even): a B micro-panel is 256 pairs x 32, 32 KiB, in L1
constexpr int MC = 192;   // rows per A block (a multiple of MR): 192 KiB of pairs, in L2
constexpr int NC = 2048;  // columns per B block: 2 MiB of pairs per thread

struct Aligned {
  void operator()(uint32_t* p) const { std::free(p); }
};
using Buf = std::unique_ptr<uint32_t[], Aligned>;
Buf alloc(size_t n) {
  return Buf(static_cast<uint32_t*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64)));
}

inline __mmask16 mask16(int count) {
  return count >= 16 ? __mmask16(0xffff) : count <= 0 ? 0 : __mmask16((1u << count) - 1);
}

// `count` (0 to 32) consecutive values from s as 32 bf16 in one vector, zero past count: bf16
// bits as stored, or f32 rounded to nearest even.
inline __m512i load32(const uint16_t* s, int count) {
  const __mmask32 m = count >= 32 ? ~__mmask32(0) : (__mmask32(1) << count) - 1;
  return _mm512_maskz_loadu_epi16(m, s);
}
inline __m512i load32(const float* s, int count) {
  const __m512 lo = _mm512_maskz_loadu_ps(mask16(count), s);
  const __m512 hi = _mm512_maskz_loadu_ps(mask16(count - 16), s + 16);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// B rows [p0, p0+kc) x columns [j0, j0+nc) -> micro-panels [nc/NR][(kc+1)/2][NR] of u32 bf16
// pairs, zero padded (the odd last k, the columns past nc). T: the stored element (uint16_t bf16
// bits, or f32 rounded here).
template <typename T>
void pack_b(const GemmArgs& g, int p0, int kc, int j0, int nc, uint32_t* dst) {
  const auto* b = static_cast<const T*>(g.b);
  const int pairs = (kc + 1) / 2;
  // permutex2var indices interleaving two rows of 32 bf16 into pairs, columns 0-15 and 16-31.
  alignas(64) uint16_t lo_idx[32], hi_idx[32];
  for (int i = 0; i < 32; ++i) {
    lo_idx[i] = uint16_t((i & 1 ? 32 : 0) + i / 2);
    hi_idx[i] = uint16_t((i & 1 ? 32 : 0) + 16 + i / 2);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int jp = 0; jp < nc; jp += NR) {
    const int w = std::min(NR, nc - jp);
    uint32_t* d = dst + size_t(jp) * pairs;
    if (g.b_nk) {
      // Stored [n, k]: a (k, k+1) pair of one column is one 32-bit word; 16 columns x 16 pairs
      // are transposed in registers.
      for (int half = 0; half < 2; ++half) {
        const int rows = std::clamp(w - 16 * half, 0, 16);
        for (int q = 0; q < pairs; q += 16) {
          const int count = std::min(32, kc - 2 * q), chunk = (count + 1) / 2;
          __m512i r[16];
          for (int i = 0; i < 16; ++i)
            r[i] = i < rows
                       ? load32(b + size_t(j0 + jp + 16 * half + i) * g.ldb + p0 + 2 * q, count)
                       : _mm512_setzero_si512();
          transpose16(r);
          for (int t = 0; t < chunk; ++t)
            _mm512_store_si512(d + size_t(q + t) * NR + 16 * half, r[t]);
        }
      }
    } else {
      // Stored [k, n]: interleave rows k and k+1.
      for (int q = 0; q < pairs; ++q) {
        const T* s = b + size_t(p0 + 2 * q) * g.ldb + j0 + jp;
        const __m512i r0 = load32(s, w);
        const __m512i r1 = 2 * q + 1 < kc ? load32(s + g.ldb, w) : _mm512_setzero_si512();
        _mm512_store_si512(d + size_t(q) * NR, _mm512_permutex2var_epi16(r0, lo, r1));
        _mm512_store_si512(d + size_t(q) * NR + 16, _mm512_permutex2var_epi16(r0, hi, r1));
      }
    }
  }
}

// A rows [i0, i0+mc) x columns [p0, p0+kc) -> micro-panels [mc/MR][(kc+1)/2][MR] of u32 bf16
// pairs, rounded to nearest even, zero padded (the odd last k, the rows past mc).
void pack_a(const GemmArgs& g, int i0, int mc, int p0, int kc, uint32_t* dst) {
  const int pairs = (kc + 1) / 2;
  const __mmask16 lanes = mask16(MR);
  for (int ip = 0; ip < mc; ip += MR) {
    const int h = std::min(MR, mc - ip);
    uint32_t* d = dst + size_t(ip) * pairs;
    for (int q = 0; q < pairs; q += 16) {
      const int count = std::min(32, kc - 2 * q), chunk = (count + 1) / 2;
      __m512i r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < h ? load32(g.a + size_t(i0 + ip + i) * g.lda + p0 + 2 * q, count)
                     : _mm512_setzero_si512();
      transpose16(r);  // r[t] lane i: row i's pair q + t
      for (int t = 0; t < chunk; ++t) _mm512_mask_storeu_epi32(d + size_t(q + t) * MR, lanes, r[t]);
    }
  }
}

// C tile (h x w of the 12 x 32 computed) = or += A panel . B panel over `pairs` pairs of k (+
// bias on the first pass).
void micro_kernel(int pairs, const uint32_t* __restrict a, const uint32_t* __restrict b, float* c,
                  int ldc, int h, int w, bool first, const float* bias) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int q = 0; q < pairs; ++q) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_load_si512(b));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_load_si512(b + 16));
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(int32_t(a[i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    a += MR;
    b += NR;
  }
  const __mmask16 m0 = mask16(w), m1 = mask16(w - 16);
  if (first && bias) {
    const __m512 bias0 = _mm512_maskz_loadu_ps(m0, bias);
    const __m512 bias1 = _mm512_maskz_loadu_ps(m1, bias + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = _mm512_add_ps(acc[i][0], bias0);
      acc[i][1] = _mm512_add_ps(acc[i][1], bias1);
    }
  }
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

void pack_b_any(const GemmArgs& g, int p0, int kc, int j0, int nc, uint32_t* dst) {
  if (g.b_type == ElemType::F32)
    pack_b<float>(g, p0, kc, j0, nc, dst);
  else
    pack_b<uint16_t>(g, p0, kc, j0, nc, dst);
}

// g's B packed whole, from the store or packed now (one task per k block and 256 columns);
// null when it would pass the store's budget.
const DpPackedB* packed_weights(DpPackStore& store, const GemmArgs& g, int threads) {
  for (const auto& e : store.entries)
    if (e->same(g)) return e.get();
  const int blocks = (g.k + KC - 1) / KC, n32 = (g.n + NR - 1) / NR * NR;
  auto e = std::make_unique<DpPackedB>();
  size_t total = 0;
  for (int i = 0; i < blocks; ++i) {
    e->offset.push_back(total);
    total += size_t(n32) * size_t((std::min(KC, g.k - i * KC) + 1) / 2);
  }
  if (store.bytes + total * 4 > store.budget) return nullptr;
  e->describe(g);
  e->data.reset(alloc(total).release());
  const int slices = (g.n + 255) / 256;
  parallel_for(
      blocks * slices,
      [&](int t) {
        const int i = t / slices, j0 = (t % slices) * 256, pc = i * KC;
        const int kc = std::min(KC, g.k - pc), pairs = (kc + 1) / 2;
        pack_b_any(g, pc, kc, j0, std::min(256, g.n - j0),
                   e->data.get() + e->offset[size_t(i)] + size_t(j0) * pairs);
      },
      threads);
  store.bytes += total * 4;
  store.entries.push_back(std::move(e));
  return store.entries.back().get();
}

// Columns [n0, n1) and rows [m0, m1) of C. With B packed already the whole column range is one
// block: each A block is rounded and packed once per task instead of once per NC columns.
void gemm_block(const GemmArgs& g, int m0, int m1, int n0, int n1, uint32_t* bp, uint32_t* ap,
                const DpPackedB* packed) {
  const int step = packed ? n1 - n0 : NC;
  for (int jc = n0; jc < n1; jc += step) {
    const int nc = std::min(step, n1 - jc);
    for (int pc = 0; pc < g.k; pc += KC) {
      const int kc = std::min(KC, g.k - pc), pairs = (kc + 1) / 2;
      const bool first = pc == 0;
      const uint32_t* b = bp;
      if (packed)  // (n0 is a multiple of NR: whole micro-panels)
        b = packed->data.get() + packed->offset[size_t(pc / KC)] + size_t(jc) * pairs;
      else
        pack_b_any(g, pc, kc, jc, nc, bp);
      for (int ic = m0; ic < m1; ic += MC) {
        const int mc = std::min(MC, m1 - ic);
        pack_a(g, ic, mc, pc, kc, ap);
        for (int jr = 0; jr < nc; jr += NR) {
          const int w = std::min(NR, nc - jr);
          const float* bias = g.bias ? g.bias + jc + jr : nullptr;
          for (int ir = 0; ir < mc; ir += MR) {
            micro_kernel(pairs, ap + size_t(ir) * pairs, b + size_t(jr) * pairs,
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
  const DpPackedB* packed =
      t_dp_pack_store && g.b_weights ? packed_weights(*t_dp_pack_store, g, threads) : nullptr;
  gemm_split(g, threads, MR, NR, [&](int m0, int m1, int n0, int n1) {
    // Per pool thread, kept between calls (as the avx512 path's).
    thread_local Buf bp = alloc(size_t(KC / 2) * NC), ap = alloc(size_t(MC) * (KC / 2));
    gemm_block(g, m0, m1, n0, n1, bp.get(), ap.get(), packed);
  });
}

}  // namespace attn::cpu::gemm_dpbf16

#pragma GCC pop_options
#endif  // ATTN_GEMM_DPBF16

namespace attn::cpu {

thread_local DpPackStore* t_dp_pack_store = nullptr;

// True when this build has the kernel and the CPU has AVX512-BF16 (with the AVX-512 subsets it
// needs and the OS saving zmm state).
bool gemm_dpbf16_usable() {
#ifdef ATTN_GEMM_DPBF16
  return amx::has_avx512_bf16();
#else
  return false;
#endif
}

void gemm_dpbf16_run(const GemmArgs& g, int threads) {
#ifdef ATTN_GEMM_DPBF16
  gemm_dpbf16::run(g, threads);
#else
  (void)g;
  (void)threads;
#endif
}

}  // namespace attn::cpu
