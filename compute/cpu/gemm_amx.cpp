// The AMX-BF16 path of cpu::sgemm for bf16 B, and for f32 B with GemmArgs::round_bf16 (GotoBLAS
// loop order, as gemm_avx512.cpp). A is rounded to bf16 while packed into row-major [MC][KC] blocks
// (a tile row is 32 consecutive k); B is packed into 32-column panels of bf16 pairs (f32 B rounded
// to nearest even on the way) [KC/2][32] (a tile row is 16 columns, each a (k, k+1) pair, the
// layout TDPBF16PS reads). A 32 x 32 block of C lives in four 16 x 16 f32 tiles fed by two A and
// two B tiles (all eight tile registers); each block of k is stored to a small buffer and added
// into C, clipped at the edges. Products are summed in f32. Linux grants the 8 KiB tile state per
// process on request (arch_prctl); without it, or without AMX, the caller takes the AVX-512 path.
#include <immintrin.h>

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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define ATTN_GEMM_AMX 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#ifdef ATTN_GEMM_AMX
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")
#include "compute/cpu/transpose16.h"

namespace attn::cpu::gemm_amx {
namespace {

constexpr int KC = 512;   // k per block (a multiple of 32); a B panel is 32 KiB, in L1
constexpr int MC = 256;   // rows per A block (a multiple of 32): 256 KiB of bf16, in L2
constexpr int NC = 1024;  // columns per B block, 1 MiB per thread

struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

struct Aligned {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using Buf = std::unique_ptr<T[], Aligned>;
template <typename T>
Buf<T> alloc(size_t n) {
  return Buf<T>(static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64)));
}

int round32(int x) {
  return (x + 31) / 32 * 32;
}

// 32 consecutive B values from `s` as bf16 bits in one vector: bf16 as stored, or f32 rounded
// to nearest even (GemmArgs::round_bf16 on f32 weights).
inline __m512i load32(const uint16_t* s) {
  return _mm512_loadu_si512(s);
}
inline __m512i load32(const float* s) {
  return reinterpret_cast<__m512i>(
      _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + 16), _mm512_loadu_ps(s)));
}
inline uint32_t bits(uint16_t v) {
  return v;
}
inline uint32_t bits(float v) {
  return bf16_bits(v);
}

// B rows [p0, p0+kc) x columns [j0, j0+nc) -> panels [nc/32][kcp/2][32] of uint32 bf16 pairs
// (k even in the low half), zero padded to kcp = round32(kc) and to whole panels. T: the stored
// element (uint16_t bf16 bits, or f32 rounded here).
template <typename T>
void pack_b(const GemmArgs& g, int p0, int kc, int j0, int nc, uint32_t* dst) {
  const auto* b = static_cast<const T*>(g.b);
  const int kcp = round32(kc), pairs = kcp / 2;
  auto at = [&](int p, int j) -> uint32_t {  // B[p0 + p][j0 + j] as bits, 0 outside
    if (p >= kc || j >= nc) return 0;
    return bits(g.b_nk ? b[size_t(j0 + j) * g.ldb + p0 + p] : b[size_t(p0 + p) * g.ldb + j0 + j]);
  };
  // permutex2var indices interleaving two rows of 32 bf16 into pairs, columns 0-15 and 16-31.
  alignas(64) uint16_t lo_idx[32], hi_idx[32];
  for (int i = 0; i < 32; ++i) {
    lo_idx[i] = uint16_t((i & 1 ? 32 : 0) + i / 2);
    hi_idx[i] = uint16_t((i & 1 ? 32 : 0) + 16 + i / 2);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int jp = 0; jp < nc; jp += 32) {
    uint32_t* d = dst + size_t(jp) * pairs;
    const bool full_w = jp + 32 <= nc;
    int q = 0;  // pairs done by whole vectors
    if (full_w && g.b_nk) {
      // Stored [n, k]: a (k, k+1) pair of one column is one 32-bit word; transpose 16 x 16.
      for (; 2 * q + 32 <= kc; q += 16) {
        for (int half = 0; half < 2; ++half) {
          __m512i r[16];
          for (int i = 0; i < 16; ++i)
            r[i] = load32(b + size_t(j0 + jp + half * 16 + i) * g.ldb + p0 + 2 * q);
          transpose16(r);
          for (int t = 0; t < 16; ++t) _mm512_store_si512(d + size_t(q + t) * 32 + half * 16, r[t]);
        }
      }
    } else if (full_w) {
      // Stored [k, n]: interleave rows k and k+1.
      for (; 2 * q + 2 <= kc; ++q) {
        const __m512i r0 = load32(b + size_t(p0 + 2 * q) * g.ldb + j0 + jp);
        const __m512i r1 = load32(b + size_t(p0 + 2 * q + 1) * g.ldb + j0 + jp);
        _mm512_store_si512(d + size_t(q) * 32, _mm512_permutex2var_epi16(r0, lo, r1));
        _mm512_store_si512(d + size_t(q) * 32 + 16, _mm512_permutex2var_epi16(r0, hi, r1));
      }
    }
    for (; q < pairs; ++q)
      for (int j = 0; j < 32; ++j)
        d[size_t(q) * 32 + j] = at(2 * q, jp + j) | at(2 * q + 1, jp + j) << 16;
  }
}

// A rows [i0, i0+mc) x columns [p0, p0+kc) -> bf16 [round32(mc)][kcp], rounded to nearest
// even, zero padded.
void pack_a(const GemmArgs& g, int i0, int mc, int p0, int kc, uint16_t* dst) {
  const int kcp = round32(kc), rows = round32(mc);
  for (int i = 0; i < rows; ++i) {
    uint16_t* d = dst + size_t(i) * kcp;
    if (i >= mc) {
      std::memset(d, 0, size_t(kcp) * 2);
      continue;
    }
    const float* s = g.a + size_t(i0 + i) * g.lda + p0;
    int p = 0;
    for (; p + 16 <= kc; p += 16) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + p));
      std::memcpy(d + p, &h, 32);
    }
    for (; p < kc; ++p) d[p] = bf16_bits(s[p]);
    for (; p < kcp; ++p) d[p] = 0;
  }
}

// C rows [r0, r0+h) x columns [c0, c0+w) (h, w <= 32) = or += the 32 x 32 tile product of the
// packed A rows and B panel over kcp, plus bias on the first k block.
void block(const uint16_t* a, int kcp, const uint32_t* b, float* c, int ldc, int h, int w,
           bool first, const float* bias) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const size_t sa = size_t(kcp) * 2;  // A row stride, bytes
  for (int kk = 0; kk < kcp; kk += 32) {
    _tile_loadd(4, a + kk, sa);
    _tile_loadd(5, a + size_t(16) * kcp + kk, sa);
    _tile_loadd(6, b + size_t(kk / 2) * 32, 128);
    _tile_loadd(7, b + size_t(kk / 2) * 32 + 16, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float t[32 * 32];
  _tile_stored(0, t, 128);
  _tile_stored(1, t + 16, 128);
  _tile_stored(2, t + 16 * 32, 128);
  _tile_stored(3, t + 16 * 32 + 16, 128);
  const __mmask16 m0 = w >= 16 ? 0xffff : __mmask16((1u << w) - 1);
  const __mmask16 m1 = w >= 32 ? 0xffff : w <= 16 ? 0 : __mmask16((1u << (w - 16)) - 1);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (first && bias) {
    b0 = _mm512_maskz_loadu_ps(m0, bias);
    b1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  }
  for (int i = 0; i < h; ++i) {
    float* r = c + size_t(i) * ldc;
    __m512 v0 = _mm512_add_ps(_mm512_load_ps(t + i * 32), b0);
    __m512 v1 = _mm512_add_ps(_mm512_load_ps(t + i * 32 + 16), b1);
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

// All of B packed once: k block i (KC deep) holds every column's panels at offset[i]
// ([round32(n)/32][kcp/2][32]), so columns from jc (a multiple of 32) start at
// offset[i] + jc * kcp/2, whatever the thread split.
struct PackedB {
  const void* b = nullptr;
  ElemType type = ElemType::F32;
  int ldb = 0, k = 0, n = 0;
  bool nk = false;
  std::vector<size_t> offset;
  Buf<uint32_t> data;
  bool same(const GemmArgs& g) const {
    return b == g.b && type == g.b_type && ldb == g.ldb && k == g.k && n == g.n && nk == g.b_nk;
  }
};

// A packed whole for every column task at once: k block i at offset[i], [round32(m)][kcp].
struct PackedA {
  const uint16_t* data = nullptr;
  std::vector<size_t> offset;
};

void gemm_block(const GemmArgs& g, int m0, int m1, int n0, int n1, uint32_t* bp, uint16_t* ap,
                const PackedB* packed, const PackedA& shared_a) {
  // Packed B needs no per-block copy: the whole column range is one block, so each A block is
  // rounded and packed once per task instead of once per NC columns.
  const int step = packed ? n1 - n0 : NC;
  for (int jc = n0; jc < n1; jc += step) {
    const int nc = std::min(step, n1 - jc);
    for (int pc = 0; pc < g.k; pc += KC) {
      const int kc = std::min(KC, g.k - pc), kcp = round32(kc);
      const bool first = pc == 0;
      const uint32_t* b = bp;
      if (packed)
        b = packed->data.get() + packed->offset[size_t(pc / KC)] + size_t(jc) * (kcp / 2);
      else
        pack_b_any(g, pc, kc, jc, nc, bp);
      for (int ic = m0; ic < m1; ic += MC) {
        const int mc = std::min(MC, m1 - ic);
        const uint16_t* a = ap;
        if (shared_a.data)
          a = shared_a.data + shared_a.offset[size_t(pc / KC)] + size_t(ic) * kcp;
        else
          pack_a(g, ic, mc, pc, kc, ap);
        for (int jr = 0; jr < nc; jr += 32) {
          const float* bias = g.bias ? g.bias + jc + jr : nullptr;
          for (int ir = 0; ir < mc; ir += 32) {
            block(a + size_t(ir) * kcp, kcp, b + size_t(jr) * (kcp / 2),
                  g.c + size_t(ic + ir) * g.ldc + jc + jr, g.ldc, std::min(32, mc - ir),
                  std::min(32, nc - jr), first, bias);
          }
        }
      }
    }
  }
}

}  // namespace

// The packed copies a GemmPackScope keeps (see gemm.h).
struct PackCache {
  size_t budget = 0, bytes = 0;
  std::vector<std::unique_ptr<PackedB>> entries;
  // g's B packed whole, from the cache or packed now; null when it would pass the budget.
  const PackedB* get(const GemmArgs& g, int threads) {
    for (const auto& e : entries)
      if (e->same(g)) return e.get();
    const int blocks = (g.k + KC - 1) / KC, n32 = round32(g.n);
    auto e = std::make_unique<PackedB>();
    size_t total = 0;
    for (int i = 0; i < blocks; ++i) {
      e->offset.push_back(total);
      total += size_t(n32) * (round32(std::min(KC, g.k - i * KC)) / 2);
    }
    if (bytes + total * 4 > budget) return nullptr;
    e->b = g.b;
    e->type = g.b_type;
    e->ldb = g.ldb;
    e->k = g.k;
    e->n = g.n;
    e->nk = g.b_nk;
    e->data = alloc<uint32_t>(total);
    // One task per k block and 256-column slice.
    const int slices = (g.n + 255) / 256;
    parallel_for(
        blocks * slices,
        [&](int t) {
          const int i = t / slices, j0 = (t % slices) * 256;
          const int kc = std::min(KC, g.k - i * KC);
          pack_b_any(g, i * KC, kc, j0, std::min(256, g.n - j0),
                     e->data.get() + e->offset[size_t(i)] + size_t(j0) * (round32(kc) / 2));
        },
        threads);
    bytes += total * 4;
    entries.push_back(std::move(e));
    return entries.back().get();
  }
};

thread_local PackCache* t_pack_cache = nullptr;

void run(const GemmArgs& g, int threads) {
  threads = thread_count(threads);
  const PackedB* packed = t_pack_cache && g.b_weights ? t_pack_cache->get(g, threads) : nullptr;
  // Split columns while each task keeps two or more panels; else rows too.
  const int col_tasks = std::max(1, std::min(threads, g.n / 64));
  const int row_tasks = col_tasks >= threads ? 1 : std::max(1, std::min(threads, g.m / 32));
  const int cols_step = ((g.n + col_tasks - 1) / col_tasks + 31) / 32 * 32;
  const int rows_step = ((g.m + row_tasks - 1) / row_tasks + 31) / 32 * 32;
  // With B packed already and the columns split, each task would round and pack the same rows
  // of A: pack them once instead, 32 rows a task, into a buffer every column task reads.
  PackedA shared_a;
  if (packed && col_tasks > 1 && row_tasks == 1) {
    const int blocks = (g.k + KC - 1) / KC, chunks = (g.m + 31) / 32;
    size_t total = 0;
    for (int i = 0; i < blocks; ++i) {
      shared_a.offset.push_back(total);
      total += size_t(round32(g.m)) * round32(std::min(KC, g.k - i * KC));
    }
    thread_local Buf<uint16_t> buf;  // the calling thread's, reused between calls
    thread_local size_t cap = 0;
    if (total > cap) {
      buf = alloc<uint16_t>(total);
      cap = total;
    }
    uint16_t* dst = buf.get();  // not `buf` in the tasks: each pool thread has its own
    parallel_for(
        blocks * chunks,
        [&](int t) {
          const int i = t / chunks, r0 = (t % chunks) * 32, kc = std::min(KC, g.k - i * KC);
          pack_a(g, r0, std::min(32, g.m - r0), i * KC, kc,
                 dst + shared_a.offset[size_t(i)] + size_t(r0) * round32(kc));
        },
        threads);
    shared_a.data = dst;
  }
  parallel_for(
      col_tasks * row_tasks,
      [&](int t) {
        const int n0 = (t % col_tasks) * cols_step, n1 = std::min(g.n, n0 + cols_step);
        const int m0 = (t / col_tasks) * rows_step, m1 = std::min(g.m, m0 + rows_step);
        if (n0 >= n1 || m0 >= m1) return;
        thread_local Buf<uint32_t> bp = alloc<uint32_t>(size_t(KC / 2) * NC);
        thread_local Buf<uint16_t> ap = alloc<uint16_t>(size_t(MC) * KC);
        TileConfig cfg;
        for (int i = 0; i < 8; ++i) {
          cfg.rows[i] = 16;
          cfg.colsb[i] = 64;
        }
        _tile_loadconfig(&cfg);
        gemm_block(g, m0, m1, n0, n1, bp.get(), ap.get(), packed, shared_a);
        _tile_release();
      },
      threads);
}

}  // namespace attn::cpu::gemm_amx

#pragma GCC pop_options
#endif  // ATTN_GEMM_AMX

namespace attn::cpu {

// True when this CPU has AMX-TILE, AMX-BF16 and AVX512-BF16 and the kernel grants this process
// the tile state (asked once).
bool gemm_amx_usable() {
#ifdef ATTN_GEMM_AMX
  static const bool ok = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx = (d >> 22 & 1) && (d >> 24 & 1);  // AMX-BF16, AMX-TILE
    if (!amx || !__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a >> 5 & 1)) return false;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl")) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return ok;
#else
  return false;
#endif
}

// Each path's own store (only one of them runs on a given CPU, each under the budget).
struct GemmPackScope::Cache {
#ifdef ATTN_GEMM_AMX
  gemm_amx::PackCache cache;
#endif
  DpPackStore dp;
  DpPackStore* saved_dp = nullptr;
};

GemmPackScope::GemmPackScope(size_t budget_bytes) : cache_(std::make_unique<Cache>()) {
#ifdef ATTN_GEMM_AMX
  cache_->cache.budget = budget_bytes;
  saved_ = gemm_amx::t_pack_cache;
  gemm_amx::t_pack_cache = &cache_->cache;
#endif
  cache_->dp.budget = budget_bytes;
  cache_->saved_dp = t_dp_pack_store;
  t_dp_pack_store = &cache_->dp;
}

GemmPackScope::~GemmPackScope() {
#ifdef ATTN_GEMM_AMX
  gemm_amx::t_pack_cache = static_cast<gemm_amx::PackCache*>(saved_);
#endif
  t_dp_pack_store = cache_->saved_dp;
}

size_t GemmPackScope::bytes() const {
  size_t n = cache_->dp.bytes;
#ifdef ATTN_GEMM_AMX
  n += cache_->cache.bytes;
#endif
  return n;
}

void gemm_amx_run(const GemmArgs& g, int threads) {
#ifdef ATTN_GEMM_AMX
  gemm_amx::run(g, threads);
#else
  (void)g;
  (void)threads;
#endif
}

}  // namespace attn::cpu
