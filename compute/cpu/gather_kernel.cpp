#include "compute/cpu/gather_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "compute/cpu/amx_tiles.h"
#include "compute/cpu/bf16_tiles.h"
#include "compute/cpu/half_rows.h"
#include "compute/cpu/score_tile.h"
#include "compute/cpu/simd.h"
#include "compute/cpu/tile_kernels.h"

namespace attn::cpu::ATTN_CPU_NS {

namespace {

constexpr int kRows = 16;   // queries per work item
constexpr int kChunk = 64;  // keys per chunk (a multiple of kVW)

// One row's segment of a pass for the bf16 stream (dp_rows): its query (bf16), keys ix[0..n),
// running max, sums by lanes (kVW floats) and accumulators (dp order).
struct DpRow {
  const uint16_t* q;
  const int32_t* ix;
  int n;
  float* m;
  float* lv;
  float* o;
};

struct GatherScratch {
  std::vector<float> q;   // f32 [dv] (or [rows, dv] for a tile): scaled queries, zero padded
  std::vector<float> o;   // f32 [dv] (or [rows, dv]): output accumulators
  std::vector<float> s;   // f32 [keys]: scores of one chunk, or of a whole row (entmax)
  std::vector<float> kp;  // f32 [keys]: key positions (ALiBi)
  std::vector<double> z;
  std::vector<double> acc;  // f64 [n_k]: selective attention's accumulator
  // A tile of streamed rows: running max and sum, next list entry and end of the visible list.
  std::vector<float> m, l;
  std::vector<float> lv;  // the bf16 stream's running sums by lanes, kVW per row
  std::vector<int64_t> cur, end;
  std::vector<DpRow> dprows;  // the bf16 stream's segments of one pass
  const float* kr[kChunk];    // the chunk's gathered K and V rows
  const float* vr[kChunk];
  const uint16_t* kh[kChunk];  // the same in 16-bit storage
  const uint16_t* vh[kChunk];
  // A union tile: the keys its rows list, each key's row membership bits, their K and V rows
  // packed, the query tile and the transposed score chunk.
  std::vector<int32_t> pos;  // i32 [n_k]: -1, or the key's place in `uni` while a tile runs
  std::vector<int32_t> uni;
  std::vector<uint64_t> member;
  std::vector<float> kpack, vpack, st, ot;
  std::vector<uint16_t> kpack16, vpack16;  // kpack, vpack in 16-bit storage
  std::vector<uint16_t> vtpack;            // bf16 tiles: the union's V^T, u16 [dv, round32(u) + 32]
  std::vector<uint32_t> pp;                // bf16 tiles: probabilities as bf16 pairs
  std::vector<float> orow;                 // bf16 tiles: one output row from O^T
  QueryTile tile;
  alignas(64) float um[kBQ], ul[kBQ], ualpha[kBQ];
};

// Where one head's K and V rows start (the GQA head mapping done once, not once per key), in
// f32 or in 16-bit storage (`half`).
struct HeadRows {
  const float* k;
  const float* v;
  const uint16_t* k16;
  const uint16_t* v16;
  size_t ldk, ldv;
  bool half;
  Precision prec;
  bool pairs;  // bf16 read in pairs (widen_bf16_pairs): queries and accumulators in pair order
};

// bf16 rows whose d and dv are whole blocks of 2 kVW values run in pair order.
bool pair_order(const KernelContext& c) {
  return c.prec == Precision::Bf16 && c.d % (2 * kVW) == 0 && c.dv % (2 * kVW) == 0 &&
         c.d / (2 * kVW) <= 8 && c.dv / (2 * kVW) <= 8;
}

HeadRows head_rows(const KernelContext& c, int h) {
  if (c.half())
    return {nullptr,      nullptr, c.k16_row(h, 0), c.v16_row(h, 0), size_t(c.d),
            size_t(c.dv), true,    c.prec,          pair_order(c)};
  return {c.p.k_row(h, 0), c.v_row(h, 0), nullptr, nullptr, size_t(c.d),
          c.v_ld(),        false,         c.prec,  false};
}

// s[c] = q . rows[c] for c < kVW: kVW independent accumulators (keys interleaved, so FMA
// latency and the gathered rows' loads overlap), summed by one transpose and add tree.
vf dots(const float* q, const float* const* rows, int d) {
  vf acc[kVW];
  for (int c = 0; c < kVW; ++c) acc[c] = vf{};
  const int full = d / kVW * kVW;
  for (int k = 0; k < full; k += kVW) {
    const vf qv = loadu(q + k);
    for (int c = 0; c < kVW; ++c) acc[c] = fmadd(qv, loadu(rows[c] + k), acc[c]);
  }
  vf s = reduce_lanes(acc);
  for (int c = 0; c < kVW; ++c)
    for (int k = full; k < d; ++k) s[c] += q[k] * rows[c][k];
  return s;
}

// dots() for d = ND vectors exactly: q held in registers, each key's row read once and folded
// into its own accumulator (keys outer, so only one row pointer is live at a time).
template <int ND>
vf dots_fixed(const float* q, const float* const* rows) {
  vf qv[ND], acc[kVW];
  for (int k = 0; k < ND; ++k) qv[k] = loadu(q + k * kVW);
  for (int c = 0; c < kVW; ++c) {
    const float* r = rows[c];
    vf a = qv[0] * loadu(r);
    for (int k = 1; k < ND; ++k) a = fmadd(qv[k], loadu(r + k * kVW), a);
    acc[c] = a;
  }
  return reduce_lanes(acc);
}

// Called for every 16 gathered keys: an explicit switch, so each dots_fixed inlines here.
vf dots_any(const float* q, const float* const* rows, int d) {
  if (d % kVW == 0) switch (d / kVW) {
      case 1:
        return dots_fixed<1>(q, rows);
      case 2:
        return dots_fixed<2>(q, rows);
      case 4:
        return dots_fixed<4>(q, rows);
      case 8:
        return dots_fixed<8>(q, rows);
      default:
        break;
    }
  return dots(q, rows, d);
}

// dots() over 16-bit rows, each widened to f32 in registers (P: Bf16 or F16).
template <Precision P>
vf dots16(const float* q, const uint16_t* const* rows, int d) {
  vf acc[kVW];
  for (int c = 0; c < kVW; ++c) acc[c] = vf{};
  const int full = d / kVW * kVW;
  for (int k = 0; k < full; k += kVW) {
    const vf qv = loadu(q + k);
    for (int c = 0; c < kVW; ++c) acc[c] = fmadd(qv, widen(P, rows[c] + k), acc[c]);
  }
  vf s = reduce_lanes(acc);
  for (int c = 0; c < kVW; ++c)
    for (int k = full; k < d; ++k) s[c] += q[k] * widen1(P, rows[c][k]);
  return s;
}

template <Precision P, int ND>
vf dots16_fixed(const float* q, const uint16_t* const* rows) {
  vf qv[ND], acc[kVW];
  for (int k = 0; k < ND; ++k) qv[k] = loadu(q + k * kVW);
  for (int c = 0; c < kVW; ++c) {
    const uint16_t* r = rows[c];
    vf a = qv[0] * widen(P, r);
    for (int k = 1; k < ND; ++k) a = fmadd(qv[k], widen(P, r + k * kVW), a);
    acc[c] = a;
  }
  return reduce_lanes(acc);
}

template <Precision P>
vf dots16_any(const float* q, const uint16_t* const* rows, int d) {
  if (d % kVW == 0) switch (d / kVW) {
      case 1:
        return dots16_fixed<P, 1>(q, rows);
      case 2:
        return dots16_fixed<P, 2>(q, rows);
      case 4:
        return dots16_fixed<P, 4>(q, rows);
      case 8:
        return dots16_fixed<P, 8>(q, rows);
      default:
        break;
    }
  return dots16<P>(q, rows, d);
}

// dots() over bf16 rows of NB blocks of 2 kVW values, q in pair order: one load, a shift and a
// mask per block give its even and odd values.
template <int NB>
vf dots_bf16_pairs(const float* q, const uint16_t* const* rows) {
  vf qv[2 * NB], acc[kVW];
  for (int k = 0; k < 2 * NB; ++k) qv[k] = loadu(q + k * kVW);
  for (int c = 0; c < kVW; ++c) {
    const uint16_t* r = rows[c];
    vf lo, hi;
    widen_bf16_pairs(r, lo, hi);
    vf a = fmadd(qv[1], hi, qv[0] * lo);
    for (int b = 1; b < NB; ++b) {
      widen_bf16_pairs(r + b * 2 * kVW, lo, hi);
      a = fmadd(qv[2 * b], lo, a);
      a = fmadd(qv[2 * b + 1], hi, a);
    }
    acc[c] = a;
  }
  return reduce_lanes(acc);
}

// The scores of kVW gathered keys in either storage.
vf gathered_dots(const HeadRows& hr, const float* q, const float* const* kr,
                 const uint16_t* const* kh, int d) {
  if (!hr.half) return dots_any(q, kr, d);
  if (hr.pairs) {
    bool done = false;
    vf s{};
    detail::dispatch_rows(
        d / (2 * kVW),
        [&](auto nb) {
          s = dots_bf16_pairs<decltype(nb)::value>(q, kh);
          done = true;
        },
        std::make_integer_sequence<int, 8>{});
    if (done) return s;
  }
  return hr.prec == Precision::Bf16 ? dots16_any<Precision::Bf16>(q, kh, d)
                                    : dots16_any<Precision::F16>(q, kh, d);
}

// Probabilities of a whole row of modified scores s[0..n) (padding up to np is -inf), in place;
// returns the row stat and sets inv, the factor the output is scaled by.
float normalise_row(const Normaliser& norm, int n_k, float* s, int n, int np,
                    std::vector<double>& z, float& inv) {
  using K = Normaliser::Kind;
  inv = n > 0 ? 1.0f : 0.0f;
  if (n == 0) return 0.0f;
  switch (norm.kind) {
    case K::Softmax: {
      float m = kNegInf;
      for (int e = 0; e < n; ++e) m = std::max(m, s[e]);
      vf sum = vf{};
      for (int e = 0; e < np; e += kVW) {
        vf p = exp2v((loadu(s + e) - m) * kLog2e);
        storeu(s + e, p);
        sum += p;
      }
      const float l = hsum(sum);
      inv = 1.0f / l;
      return m + std::log(l);
    }
    case K::Entmax15: {
      z.resize(n);
      for (int e = 0; e < n; ++e) z[e] = 0.5 * double(s[e]);
      const double tau = entmax15_tau(z);
      for (int e = 0; e < n; ++e) {
        double r = std::max(0.5 * double(s[e]) - tau, 0.0);
        s[e] = float(r * r);
      }
      return float(tau);
    }
    default: {
      elementwise_probs(norm, n_k, s, 1, np, np);
      if (norm.kind != K::SoftplusL1) return 0.0f;
      float l = 0.0f;
      for (int e = 0; e < n; ++e) l += s[e];
      inv = l > 0.0f ? 1.0f / l : 0.0f;
      return l > 0.0f ? std::log(l) : 0.0f;
    }
  }
}

// o[0..dv) = o * alpha + sum_x p[x] vr[x] over gathered V rows (two accumulator sets, even and
// odd keys, to hide FMA latency; o held in registers for the common widths).
template <int NV>
void accumulate_rows_fixed(const float* const* vr, int n, const float* p, float alpha, float* o) {
  vf acc[2][NV];
  const vf a = splat(alpha);
  for (int v = 0; v < NV; ++v) {
    acc[0][v] = loadu(o + v * kVW) * a;
    acc[1][v] = vf{};
  }
  int x = 0;
  for (; x + 1 < n; x += 2) {
    const vf a0 = splat(p[x]), a1 = splat(p[x + 1]);
    for (int v = 0; v < NV; ++v) {
      acc[0][v] = fmadd(a0, loadu(vr[x] + v * kVW), acc[0][v]);
      acc[1][v] = fmadd(a1, loadu(vr[x + 1] + v * kVW), acc[1][v]);
    }
  }
  if (x < n) {
    const vf a0 = splat(p[x]);
    for (int v = 0; v < NV; ++v) acc[0][v] = fmadd(a0, loadu(vr[x] + v * kVW), acc[0][v]);
  }
  for (int v = 0; v < NV; ++v) storeu(o + v * kVW, acc[0][v] + acc[1][v]);
}

void accumulate_rows(int dv, const float* const* vr, int n, const float* p, float alpha, float* o) {
  bool fixed = false;
  detail::dispatch_rows(
      dv / kVW,
      [&](auto nv) {
        accumulate_rows_fixed<decltype(nv)::value>(vr, n, p, alpha, o);
        fixed = true;
      },
      std::make_integer_sequence<int, 8>{});
  if (fixed) return;
  for (int k = 0; k < dv; k += kVW) storeu(o + k, loadu(o + k) * splat(alpha));
  for (int x = 0; x < n; ++x) {
    const vf a = splat(p[x]);
    for (int k = 0; k < dv; k += kVW) storeu(o + k, fmadd(a, loadu(vr[x] + k), loadu(o + k)));
  }
}

// accumulate_rows_fixed over 16-bit V rows widened in registers.
template <Precision P, int NV>
void accumulate_rows16_fixed(const uint16_t* const* vr, int n, const float* p, float alpha,
                             float* o) {
  vf acc[2][NV];
  const vf a = splat(alpha);
  for (int v = 0; v < NV; ++v) {
    acc[0][v] = loadu(o + v * kVW) * a;
    acc[1][v] = vf{};
  }
  int x = 0;
  for (; x + 1 < n; x += 2) {
    const vf a0 = splat(p[x]), a1 = splat(p[x + 1]);
    for (int v = 0; v < NV; ++v) {
      acc[0][v] = fmadd(a0, widen(P, vr[x] + v * kVW), acc[0][v]);
      acc[1][v] = fmadd(a1, widen(P, vr[x + 1] + v * kVW), acc[1][v]);
    }
  }
  if (x < n) {
    const vf a0 = splat(p[x]);
    for (int v = 0; v < NV; ++v) acc[0][v] = fmadd(a0, widen(P, vr[x] + v * kVW), acc[0][v]);
  }
  for (int v = 0; v < NV; ++v) storeu(o + v * kVW, acc[0][v] + acc[1][v]);
}

template <Precision P>
void accumulate_rows16(int dv, const uint16_t* const* vr, int n, const float* p, float alpha,
                       float* o) {
  bool fixed = false;
  detail::dispatch_rows(
      dv / kVW,
      [&](auto nv) {
        accumulate_rows16_fixed<P, decltype(nv)::value>(vr, n, p, alpha, o);
        fixed = true;
      },
      std::make_integer_sequence<int, 8>{});
  if (fixed) return;
  for (int k = 0; k < dv; k += kVW) storeu(o + k, loadu(o + k) * splat(alpha));
  for (int x = 0; x < n; ++x) {
    const vf a = splat(p[x]);
    for (int k = 0; k < dv; k += kVW) storeu(o + k, fmadd(a, widen(P, vr[x] + k), loadu(o + k)));
  }
}

// accumulate_rows over bf16 V rows of NB blocks of 2 kVW values, o in pair order.
template <int NB>
void accumulate_bf16_pairs(const uint16_t* const* vr, int n, const float* p, float alpha,
                           float* o) {
  vf acc[2][2 * NB];
  const vf a = splat(alpha);
  for (int v = 0; v < 2 * NB; ++v) {
    acc[0][v] = loadu(o + v * kVW) * a;
    acc[1][v] = vf{};
  }
  int x = 0;
  for (; x + 1 < n; x += 2) {
    const vf a0 = splat(p[x]), a1 = splat(p[x + 1]);
    for (int b = 0; b < NB; ++b) {
      vf lo, hi;
      widen_bf16_pairs(vr[x] + b * 2 * kVW, lo, hi);
      acc[0][2 * b] = fmadd(a0, lo, acc[0][2 * b]);
      acc[0][2 * b + 1] = fmadd(a0, hi, acc[0][2 * b + 1]);
      widen_bf16_pairs(vr[x + 1] + b * 2 * kVW, lo, hi);
      acc[1][2 * b] = fmadd(a1, lo, acc[1][2 * b]);
      acc[1][2 * b + 1] = fmadd(a1, hi, acc[1][2 * b + 1]);
    }
  }
  if (x < n) {
    const vf a0 = splat(p[x]);
    for (int b = 0; b < NB; ++b) {
      vf lo, hi;
      widen_bf16_pairs(vr[x] + b * 2 * kVW, lo, hi);
      acc[0][2 * b] = fmadd(a0, lo, acc[0][2 * b]);
      acc[0][2 * b + 1] = fmadd(a0, hi, acc[0][2 * b + 1]);
    }
  }
  for (int v = 0; v < 2 * NB; ++v) storeu(o + v * kVW, acc[0][v] + acc[1][v]);
}

// o = o * alpha + sum_x p[x] V[x] over the chunk's gathered V rows, in either storage.
void gathered_accumulate(const HeadRows& hr, const GatherScratch& w, int dv, int n, const float* p,
                         float alpha, float* o) {
  if (hr.pairs) {
    bool done = false;
    detail::dispatch_rows(
        dv / (2 * kVW),
        [&](auto nb) {
          accumulate_bf16_pairs<decltype(nb)::value>(w.vh, n, p, alpha, o);
          done = true;
        },
        std::make_integer_sequence<int, 8>{});
    if (done) return;
  }
  if (!hr.half)
    accumulate_rows(dv, w.vr, n, p, alpha, o);
  else if (hr.prec == Precision::Bf16)
    accumulate_rows16<Precision::Bf16>(dv, w.vh, n, p, alpha, o);
  else
    accumulate_rows16<Precision::F16>(dv, w.vh, n, p, alpha, o);
}

// Writes query i of head h: O = acc * inv and the row statistic.
void write_row(const KernelContext& c, int h, int i, const float* acc, float inv, float stat) {
  float* out = c.o + (size_t(h) * c.n_q + i) * c.d;
  for (int k = 0; k < c.d; ++k) out[k] = acc[k] * inv;
  c.row_stat[size_t(h) * c.n_q + i] = stat;
}

// The same for a row of a streaming normaliser, from its running max m (base 2) and sum l.
void write_streamed_row(const KernelContext& c, int h, int i, const float* acc, float m, float l) {
  using K = Normaliser::Kind;
  const K kind = c.spec.norm.kind;
  float inv = 1.0f, stat = 0.0f;
  if (kind == K::Softmax || kind == K::SoftplusL1) {
    inv = l > 0.0f ? 1.0f / l : 0.0f;
    // Softmax runs in base 2 (scores were multiplied by log2 e): lse = (m2 + log2 l) ln 2.
    if (l > 0.0f) stat = kind == K::Softmax ? (m + std::log2(l)) * kLn2 : std::log(l);
  }
  write_row(c, h, i, acc, inv, stat);
}

template <typename T>
void prefetch_rows(const T* const* rows, int n, int bytes) {
  if (bytes == 256) {  // d = 64, the common head size: four lines, no inner loop
    for (int x = 0; x < n; ++x) {
      const char* r = reinterpret_cast<const char*>(rows[x]);
      __builtin_prefetch(r);
      __builtin_prefetch(r + 64);
      __builtin_prefetch(r + 128);
      __builtin_prefetch(r + 192);
    }
    return;
  }
  for (int x = 0; x < n; ++x)
    for (int b = 0; b < bytes; b += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(rows[x]) + b);
}

// How many of the ascending keys [b, e) lie below lim: the causally visible prefix of a list.
// Causal selections list no later key, so the usual answer is the whole list, read at its end
// (a binary search would touch a dozen cache lines of a list that may be far from cache).
int64_t visible_prefix(const int32_t* b, const int32_t* e, int32_t lim) {
  if (b == e || e[-1] < lim) return e - b;
  return std::lower_bound(b, e, lim) - b;
}

// The end of the segment of [a, e) below k1 (e[-1] >= k1): whole vectors of 16 keys skipped
// while their last key is below k1, then a scan.
int64_t segment_end(const int32_t* col, int64_t a, int64_t e, int32_t k1) {
  int64_t b = a;
  while (b + 16 < e && col[b + 15] < k1) b += 16;
  // The end is among the next (at most) 16 keys: counted, not searched (a search's exit
  // branch mispredicts once per segment).
  const int64_t m = std::min<int64_t>(16, e - b);
  int cnt = 0;
  for (int t = 0; t < m; ++t) cnt += col[b + t] < k1;
  return b + cnt;
}

// Pointers to the K and V rows of keys ix[0..n) (n <= kChunk), padded to whole vectors by
// repeating the last key.
void gather_rows(const HeadRows& hr, GatherScratch& w, const int32_t* ix, int n) {
  const int np = (n + kVW - 1) / kVW * kVW;
  if (hr.half) {
    for (int x = 0; x < np; ++x) {
      const size_t j = size_t(ix[std::min(x, n - 1)]);
      w.kh[x] = hr.k16 + j * hr.ldk;
      w.vh[x] = hr.v16 + j * hr.ldv;
    }
    return;
  }
  for (int x = 0; x < np; ++x) {
    const size_t j = size_t(ix[std::min(x, n - 1)]);
    w.kr[x] = hr.k + j * hr.ldk;
    w.vr[x] = hr.v + j * hr.ldv;
  }
}

// Rows ahead whose list segments the streams prefetch.
constexpr int kListAhead = 3;

#if defined(ATTN_CPU_AVX512) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ATTN_GATHER_DPBF16 1
// AVX512-BF16 on top of the AVX-512 set (callers check amx::has_avx512_bf16() first).
#define ATTN_DPBF16_TARGET \
  __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq,avx512bf16")))

// The bf16 stream: query rows' keys over bf16 K and V rows of NB blocks of 32 values, on
// vdpbf16ps, a group of kVW keys at a time and pipelined by one group: group g's scores (q . k with
// q and k in bf16 as stored, exact products summed in f32) and probabilities, then group g - 1's
// P V, two keys at a time from their rows interleaved, with the probabilities rounded to bf16 (the
// rounding AMX tiles and FlashAttention's bf16 P V apply). Softmax without modifiers, in base 2
// (qscale includes log2 e). The probabilities are taken against a reference m that moves only when
// a score passes it by more than kDpSlack: the softmax is the same for any reference (the row's lse
// is m + log2 l), o and the running sum l (kept in lanes, lv) are rescaled only when it moves, and
// no pass over a chunk's scores for their max stands between the scores and P V. The output o (f32,
// 2 NB vectors) is in "dp order": vector 2b + h, lane 4L + j holds dimension 32b + 8L + 4h + j
// (what the 16-bit interleave yields); from_dp_order restores it. What it is bound by: instructions
// (~6 cycles a key with rows in L1 on Zen 5), so each group's 16 dot products fold into its scores
// as they complete (in-lane shuffles first: a whole-group transpose held 16 vectors live and
// spilled) and a key's row address is formed once; and fetching K and V rows from L2 (~2-3 cycles a
// key more), which software prefetch did not hide; at N = 16384, ~3 cycles a key more again for
// rows first fetched into L2 from L3 (keys confined to 1,024 rows ran 8.4 cycles a key
// against 11.7; tiles of 256-4,096 rows and ranges of 1,024-4,500 keys all ran 11.3-12.4, and
// prefetching a range's rows into L2 ahead gained nothing). Measured no faster as well: the
// segments as one branch-free stream of groups with o in memory (13.4-14.4 cycles a key against
// 12.1-12.5), the pending P V interleaved with the next group's quads in program order
// (13.1-13.4 against 11.1-11.4), row strides as compile-time shifts, a degree-4 exponential.
constexpr float kDpSlack = 8.0f;  // p <= 2^8: far from overflow, rescales rare

// Two of a group's partial-sum vectors folded: per 128-bit lane, [a0+a1, a2+a3, b0+b1, b2+b3].
ATTN_DPBF16_TARGET inline __m512 fold_pairs(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd));
}
// The same across 128-bit lanes: [a.0+a.1, a.2+a.3, b.0+b.1, b.2+b.3] by lane. (Vector
// extensions: GCC 12's _mm512_shuffle_f32x4 warns of an uninitialised operand.)
ATTN_DPBF16_TARGET inline __m512 fold_lanes(__m512 a, __m512 b) {
  const vf x = vf(a), y = vf(b);
  return __m512(
      __builtin_shufflevector(x, y, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
      __builtin_shufflevector(x, y, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31));
}

// 2^x for x <= kDpSlack, to the precision of a bf16 probability: degree-5 Taylor on the
// fraction (relative error < 3e-6 against bf16's 2^-9), 0 below 2^-125.
ATTN_DPBF16_TARGET inline __m512 exp2_for_bf16(__m512 x) {
  x = __m512(vmax(vf(x), splat(-125.0f)));
  const __m512 r = _mm512_maskz_roundscale_ps(__mmask16(0xffff), x,
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, r);
  __m512 p = _mm512_set1_ps(1.3333558146428443e-03f);                  // ln2^5 / 5!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-03f));  // ln2^4 / 4!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-02f));  // ln2^3 / 3!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-01f));  // ln2^2 / 2!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-01f));  // ln2
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(__mmask16(0xffff), p, r);
}

// One pass's segments of a tile's rows (DpRow), streamed as one pipeline: the groups of every row
// in turn, group g's scores beside group g - 1's P V whichever rows they belong to. A row's segment
// ends on a whole group unless it is the row's last. Rows switch by storing and loading their state
// (q, m and l when scoring moves on; o when P V does), so a segment costs little beyond its keys:
// at N = 16384, segments of 16 keys on average ran 12.8 cycles a key against 15.1 when each was a
// pipeline of its own, and 48 (a pass's size, L2-sized again) ran as fast as 96 had.
template <int NB>
ATTN_DPBF16_TARGET void dp_rows(const DpRow* rows, int nrows, float qscale, const HeadRows& hr) {
  const uint16_t* kb = hr.k16;
  const uint16_t* vb = hr.v16;
  const size_t ldk = hr.ldk, ldv = hr.ldv;
  const __m512 qs = _mm512_set1_ps(qscale);
  __m512 acc[2 * NB];
  for (int v = 0; v < 2 * NB; ++v) acc[v] = _mm512_setzero_ps();
  float* acc_o = nullptr;  // whose accumulators acc holds
  // Two slots: the group whose P V is pending and the one being scored.
  alignas(64) uint16_t pb[2][kVW];
  const uint16_t* vr[2][kVW];
  float* pend_o = nullptr;  // the pending group's row (its o), or none
  int pend_slot = 0;
  auto pv = [&](int slot, float* o) {
    if (o != acc_o) {
      if (acc_o)
        for (int v = 0; v < 2 * NB; ++v) _mm512_storeu_ps(acc_o + 16 * v, acc[v]);
      for (int v = 0; v < 2 * NB; ++v) acc[v] = _mm512_loadu_ps(o + 16 * v);
      acc_o = o;
    }
#pragma GCC unroll 8
    for (int x = 0; x < kVW; x += 2) {
      uint32_t pw;
      std::memcpy(&pw, pb[slot] + x, 4);
      const __m512bh pp = __m512bh(_mm512_set1_epi32(int32_t(pw)));
      const uint16_t* ra = vr[slot][x];
      const uint16_t* rb = vr[slot][x + 1];
      for (int b = 0; b < NB; ++b) {
        __m512i va = _mm512_loadu_si512(ra + 32 * b), vb2 = _mm512_loadu_si512(rb + 32 * b);
        // Loaded once into registers: GCC otherwise folds each load into both unpacks, and a
        // row from L2 is then fetched by two loads (~10% slower from L2).
        asm("" : "+v"(va), "+v"(vb2));
        acc[2 * b] = _mm512_dpbf16_ps(acc[2 * b], __m512bh(_mm512_unpacklo_epi16(va, vb2)), pp);
        acc[2 * b + 1] =
            _mm512_dpbf16_ps(acc[2 * b + 1], __m512bh(_mm512_unpackhi_epi16(va, vb2)), pp);
      }
    }
  };
  int slot = 0;
  for (int y = 0; y < nrows; ++y) {
    const DpRow& row = rows[y];
    if (y + 1 < nrows) {  // the next row's state, out of L1 since the last pass
      prefetch_range(rows[y + 1].q, size_t(NB) * 64);
      prefetch_range(rows[y + 1].o, size_t(NB) * 128);
    }
    // A row's segment of its list is new to the cache each pass (the pass before read the lines
    // ahead of it), and each group's first key waits for its line: every line of the segment
    // three rows ahead. Zen 4, top-256 at N = 16384 and two threads: 150 ms against 200 ms with
    // the first line of the next row's only (waits on list lines were 40% of run_tile's samples);
    // one row ahead 170 ms, two to five rows alike.
    if (y + kListAhead < nrows)
      prefetch_range(rows[y + kListAhead].ix, size_t(rows[y + kListAhead].n) * 4);
    __m512i qv[NB];
    for (int b = 0; b < NB; ++b) qv[b] = _mm512_loadu_si512(row.q + 32 * b);
    __m512 lsum = _mm512_loadu_ps(row.lv);
    float m = *row.m;
    const int32_t* ix = row.ix;
    const int n = row.n;
    for (int g = 0; g < n; g += kVW, slot ^= 1) {
      const int last = std::min(kVW, n - g) - 1;  // past it, the last key again with p = 0
      const int32_t* gi = ix + g;
      alignas(64) int32_t tail[kVW];
      if (last < kVW - 1) {
        for (int c = 0; c < kVW; ++c) tail[c] = gi[std::min(c, last)];
        gi = tail;
      }
      auto key = [&](int c) {
        const size_t j = size_t(gi[c]);
        vr[slot][c] = vb + j * ldv;
        const uint16_t* r = kb + j * ldk;
        __m512 a =
            _mm512_dpbf16_ps(_mm512_setzero_ps(), __m512bh(qv[0]), __m512bh(_mm512_loadu_si512(r)));
        for (int b = 1; b < NB; ++b)
          a = _mm512_dpbf16_ps(a, __m512bh(qv[b]), __m512bh(_mm512_loadu_si512(r + 32 * b)));
        return a;
      };
      // Quad i's sums by 128-bit lane: lane 4k + j of u[i] holds lane k's sum for key 4i + j.
      __m512 u[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
        u[i] = fold_pairs(fold_pairs(key(4 * i), key(4 * i + 1)),
                          fold_pairs(key(4 * i + 2), key(4 * i + 3)));
      __m512 s = _mm512_mul_ps(fold_lanes(fold_lanes(u[0], u[1]), fold_lanes(u[2], u[3])), qs);
      const __mmask16 live = __mmask16((2u << last) - 1);
      if (last < kVW - 1) s = _mm512_mask_blend_ps(live, _mm512_set1_ps(kNegInf), s);
      if (_mm512_cmp_ps_mask(s, _mm512_set1_ps(m + kDpSlack), _CMP_GT_OQ)) {
        // A new reference: this row's pending P V first (its p used the old one), then its o
        // (in registers or in memory) and sums rescaled.
        if (pend_o == row.o) pv(pend_slot, pend_o), pend_o = nullptr;
        const float mx = std::max(m, hmax(vf(s)));
        const __m512 alpha = _mm512_set1_ps(m == kNegInf ? 0.0f : std::exp2(m - mx));
        if (acc_o == row.o) {
          for (int v = 0; v < 2 * NB; ++v) acc[v] = _mm512_mul_ps(acc[v], alpha);
        } else {
          for (int v = 0; v < 2 * NB; ++v)
            _mm512_storeu_ps(row.o + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(row.o + 16 * v), alpha));
        }
        lsum = _mm512_mul_ps(lsum, alpha);
        m = mx;
      }
      const __m512 pr =
          _mm512_maskz_mov_ps(live, exp2_for_bf16(_mm512_sub_ps(s, _mm512_set1_ps(m))));
      lsum = _mm512_add_ps(lsum, pr);
      _mm256_store_si256(reinterpret_cast<__m256i*>(pb[slot]), __m256i(_mm512_cvtneps_pbh(pr)));
      if (pend_o) pv(pend_slot, pend_o);
      pend_o = row.o;
      pend_slot = slot;
    }
    _mm512_storeu_ps(row.lv, lsum);
    *row.m = m;
  }
  if (pend_o) pv(pend_slot, pend_o);
  if (acc_o)
    for (int v = 0; v < 2 * NB; ++v) _mm512_storeu_ps(acc_o + 16 * v, acc[v]);
}

// A pass's segments (see dp_rows) for NB = dp blocks.
void dpbf16_rows(int dp, const DpRow* rows, int nrows, float qscale, const HeadRows& hr) {
  switch (dp) {
    case 1:
      return dp_rows<1>(rows, nrows, qscale, hr);
    case 2:
      return dp_rows<2>(rows, nrows, qscale, hr);
    case 3:
      return dp_rows<3>(rows, nrows, qscale, hr);
    default:
      return dp_rows<4>(rows, nrows, qscale, hr);
  }
}
#else
void dpbf16_rows(int, const DpRow*, int, float, const HeadRows&) {}
#endif

// The bf16 stream's dp order back to dimension order, in place over o[0..d), d % 32 == 0.
void from_dp_order(float* o, int d) {
  for (int b = 0; b < d; b += 32) {
    float t[32];
    for (int h = 0; h < 2; ++h)
      for (int L = 0; L < 4; ++L)
        for (int j = 0; j < 4; ++j) t[8 * L + 4 * h + j] = o[b + 16 * h + 4 * L + j];
    std::memcpy(o + b, t, sizeof t);
  }
}
// NB (blocks of 32 dimensions) where the bf16 stream runs this problem's streamed rows, else 0:
// bf16 rows in a kernel set with bf16 tiles (whose CPUs have AVX512-BF16, and whose dense tiles
// round the probabilities to bf16 as well), softmax without score modifiers, d = dv <= 128.
int dpbf16_blocks(const KernelContext& c) {
#if defined(ATTN_GATHER_DPBF16)
  if (!c.bf16_tiles() || c.prec != Precision::Bf16 || !amx::has_avx512_bf16() ||
      c.spec.norm.kind != Normaliser::Kind::Softmax || !c.spec.mods.empty() || c.d != c.dv ||
      c.d % 32 != 0 || c.d > 128)
    return 0;
  return c.d / 32;
#else
  (void)c;
  return 0;
#endif
}

// Keys idx[0..n) of row r of a streamed tile, in chunks: scores on gathered K rows, the online
// softmax (or an elementwise normaliser) and the gathered V rows into the row's accumulator.
void stream_keys(const KernelContext& c, GatherScratch& w, const HeadRows& hr, int h, int i, int r,
                 const int32_t* idx, int n) {
  using K = Normaliser::Kind;
  const Normaliser& norm = c.spec.norm;
  const bool softmax = norm.kind == K::Softmax;
  const float* q = w.q.data() + size_t(r) * c.dv;
  float* o = w.o.data() + size_t(r) * c.dv;
  float* s = w.s.data();
  float m = w.m[r], l = w.l[r];
  for (int e0 = 0; e0 < n; e0 += kChunk) {
    const int cn = std::min(kChunk, n - e0);
    const int np = (cn + kVW - 1) / kVW * kVW;
    const int32_t* ix = idx + e0;
    gather_rows(hr, w, ix, cn);
    // V rows are read after the scores: their loads start now. K rows one group ahead.
    if (hr.half) {
      prefetch_rows(w.vh, cn, c.dv * 2);
      prefetch_rows(w.kh, std::min(cn, kVW), c.d * 2);
      for (int g = 0; g < np; g += kVW) {
        if (g + kVW < cn) prefetch_rows(w.kh + g + kVW, std::min(kVW, cn - g - kVW), c.d * 2);
        storeu(s + g, gathered_dots(hr, q, w.kr + g, w.kh + g, c.d));
      }
    } else {
      prefetch_rows(w.vr, cn, c.dv * 4);
      prefetch_rows(w.kr, std::min(cn, kVW), c.d * 4);
      for (int g = 0; g < np; g += kVW) {
        if (g + kVW < cn) prefetch_rows(w.kr + g + kVW, std::min(kVW, cn - g - kVW), c.d * 4);
        storeu(s + g, dots_any(q, w.kr + g, c.d));
      }
    }
    if (!c.spec.mods.empty()) {
      for (int x = 0; x < np; ++x) w.kp[x] = float(c.kpos[ix[std::min(x, cn - 1)]]);
      apply_mods_row(c, h, c.qpos[i], w.kp.data(), s, np);
      if (softmax)
        for (int x = 0; x < np; x += kVW) storeu(s + x, loadu(s + x) * kLog2e);
    }
    for (int x = cn; x < np; ++x) s[x] = kNegInf;
    float alpha = 1.0f;
    if (softmax) {
      vf mv = splat(m);
      for (int x = 0; x < np; x += kVW) mv = vmax(mv, loadu(s + x));
      const float mx = hmax(mv);
      const float m_use = mx == kNegInf ? 0.0f : mx;
      alpha = std::exp2(m - m_use);
      vf sum = vf{};
      for (int x = 0; x < np; x += kVW) {
        const vf pr = exp2v(loadu(s + x) - m_use);
        storeu(s + x, pr);
        sum += pr;
      }
      l = l * alpha + hsum(sum);
      m = mx;
    } else {
      elementwise_probs(norm, c.n_k, s, 1, np, np);
      if (norm.kind == K::SoftplusL1)
        for (int x = 0; x < cn; ++x) l += s[x];
    }
    gathered_accumulate(hr, w, c.dv, cn, s, alpha, o);
  }
  w.m[r] = m;
  w.l[r] = l;
}

// Queries i0..i1 of head h with a streaming normaliser. The tile walks the keys in ranges small
// enough for their K and V rows to stay in L2 while every row of the tile reads its listed keys
// in that range (the bf16 stream: in passes of each row's next keys by rank, which cover about
// such a range): scattered lists (top-k) reuse each fetched row across the tile's queries.
void run_tile(const KernelContext& c, GatherScratch& w, int h, int i0, int i1, int64_t& entries) {
  const IndexLayout& x = c.layout.index(h);
  const int32_t* col = x.col.data();
  const HeadRows hr = head_rows(c, h);
  const int rows = i1 - i0;
  const float qscale = c.scale * (c.base2_softmax() ? kLog2e : 1.0f);
  const int dp = dpbf16_blocks(c);  // > 0: streamed rows run on vdpbf16ps
  int kend = 0;
  const int64_t listed_before = entries;
  for (int r = 0; r < rows; ++r) {
    const int i = i0 + r;
    const int32_t* b = col + x.row_ptr[i];
    // Listed keys are ascending, so the causally visible ones are a prefix.
    const int n = int(visible_prefix(b, col + x.row_ptr[i + 1], c.lim[i]));
    w.cur[r] = x.row_ptr[i];
    w.end[r] = x.row_ptr[i] + n;
    if (n > 0) kend = std::max(kend, b[n - 1] + 1);
    entries += n;
    float* qs = w.q.data() + size_t(r) * c.dv;
    if (dp == 0) {  // (dp_scores reads q where it is stored)
      if (c.half())
        for (int k = 0; k < c.d; ++k) qs[k] = widen1(c.prec, c.q16_row(h, i)[k]) * qscale;
      else
        for (int k = 0; k < c.d; ++k) qs[k] = c.p.q_row(h, i)[k] * qscale;
      if (hr.pairs) to_pair_order(qs, c.d);
    }
    std::fill_n(w.o.data() + size_t(r) * c.dv, c.dv, 0.0f);
    w.m[r] = kNegInf;
    w.l[r] = 0.0f;
    if (dp > 0) std::fill_n(w.lv.data() + size_t(r) * kVW, kVW, 0.0f);
  }
  // ~256 KiB of K and V rows per range, and at least 48 keys a segment on average: where the
  // rows' lists are so sparse that such a range would hold only a few of each row's keys, the
  // range widens (each segment pays fixed costs: a chunk's on the f32 and f16 streams, its
  // row's state on the bf16 stream).
  const int64_t listed = entries - listed_before;
  int range =
      std::max(kChunk, int((size_t(256) << 10) / (size_t(c.d + c.dv) * element_bytes(c.prec))));
  constexpr int64_t kKeysPerSegment = 48;
  if (dp > 0) {
    // The bf16 stream takes its ranges by rank instead: each pass, every row's next `seg` keys,
    // as many as a key range of that size holds of an average row (the lists of a tile's rows
    // are alike: a top-k's keys of one rank lie near each other). Segments then end on a fixed
    // count, so its loops run the same trip counts row after row; cut at a key range they ended
    // unpredictably (a mispredicted loop exit per segment, and a search for the end). One
    // thread, top-256 at N = 16384: 11.2-11.3 cycles a key against 12.0-12.4; rows of two kinds
    // (half listing early keys, half late ones), 11.4-11.5 against 15.8-16.8.
    int seg = int(kKeysPerSegment);
    if (listed > 0 && kend > 0)
      seg = int(std::max<int64_t>(seg, int64_t(range) * listed / (int64_t(rows) * kend)));
    seg = seg / kVW * kVW;
    for (bool more = true; more;) {
      more = false;
      w.dprows.clear();
      for (int r = 0; r < rows; ++r) {
        const int64_t a = w.cur[r], e = w.end[r];
        if (a == e) continue;
        const int64_t b = std::min<int64_t>(e, a + seg);
        w.dprows.push_back({c.q16_row(h, i0 + r), col + a, int(b - a), &w.m[r],
                            w.lv.data() + size_t(r) * kVW, w.o.data() + size_t(r) * c.dv});
        w.cur[r] = b;
        more = more || b < e;
      }
      if (!w.dprows.empty()) dpbf16_rows(dp, w.dprows.data(), int(w.dprows.size()), qscale, hr);
    }
  } else {
    if (listed > 0)
      range = int(std::max<int64_t>(range, int64_t(kend) * rows * kKeysPerSegment / listed));
    range = (range + kChunk - 1) / kChunk * kChunk;
    // As dp_rows does, each row's segment three rows ahead, at the average segment's size (the
    // search for a segment's end waits on its first line otherwise; top-256 at N = 16384: 290-310
    // ms against 350).
    const size_t ahead =
        listed > 0 && kend > 0 ? size_t(listed * range / (int64_t(rows) * kend) + 16) * 4 : 256;
    for (int k0 = 0; k0 < kend; k0 += range) {
      const int k1 = k0 + range;
      for (int r = 0; r < rows; ++r) {
        if (r + kListAhead < rows) prefetch_range(col + w.cur[r + kListAhead], ahead);
        const int64_t a = w.cur[r], e = w.end[r];
        if (a == e) continue;
        const int64_t b = col[e - 1] < k1 ? e : segment_end(col, a, e, k1);
        if (b == a) continue;
        stream_keys(c, w, hr, h, i0 + r, r, col + a, int(b - a));
        w.cur[r] = b;
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    if (dp > 0) {
      w.l[r] = hsum(loadu(w.lv.data() + size_t(r) * kVW));  // (the stream kept it in lanes)
      from_dp_order(w.o.data() + size_t(r) * c.dv, c.dv);
    } else if (hr.pairs) {
      from_pair_order(w.o.data() + size_t(r) * c.dv, c.dv);
    }
    write_streamed_row(c, h, i0 + r, w.o.data() + size_t(r) * c.dv, w.m[r], w.l[r]);
  }
}

// One whole query row, for entmax (it needs the row's threshold) and selective attention (its
// accumulator `acc` is the head's, so rows run in order). Scores land in a row buffer first.
void run_row(KernelContext& c, GatherScratch& w, int h, int i, std::vector<double>* acc,
             int64_t& entries) {
  const IndexLayout& x = c.layout.index(h);
  const int32_t* idx = x.col.data() + x.row_ptr[i];
  // Listed keys are ascending, so the causally visible ones are a prefix.
  const int n = int(visible_prefix(idx, x.col.data() + x.row_ptr[i + 1], c.lim[i]));
  const HeadRows hr = head_rows(c, h);
  if (c.half())
    for (int k = 0; k < c.d; ++k) w.q[k] = widen1(c.prec, c.q16_row(h, i)[k]) * c.scale;
  else
    for (int k = 0; k < c.d; ++k) w.q[k] = c.p.q_row(h, i)[k] * c.scale;
  if (hr.pairs) to_pair_order(w.q.data(), c.d);
  std::fill(w.o.begin(), w.o.begin() + c.dv, 0.0f);
  entries += n;
  const int np = (n + kVW - 1) / kVW * kVW;
  if (int(w.s.size()) < np) {
    w.s.resize(np);
    w.kp.resize(np);
  }
  float* s = w.s.data();
  for (int e0 = 0; e0 < n; e0 += kChunk) {
    const int cn = std::min(kChunk, n - e0);
    gather_rows(hr, w, idx + e0, cn);
    for (int g = 0; g < cn; g += kVW) {
      float t[kVW];
      storeu(t, gathered_dots(hr, w.q.data(), w.kr + g, w.kh + g, c.d));
      std::copy_n(t, std::min(kVW, cn - g), s + e0 + g);
    }
  }
  if (!c.spec.mods.empty()) {
    for (int e = 0; e < n; ++e) w.kp[e] = float(c.kpos[idx[e]]);
    apply_mods_row(c, h, c.qpos[i], w.kp.data(), s, n);
  }
  for (int e = n; e < np; ++e) s[e] = kNegInf;
  if (acc) {
    const int32_t qp = c.qpos[i];
    for (int e = 0; e < n; ++e) {
      const int j = idx[e];
      const float raw = s[e];
      s[e] = float(double(raw) - (*acc)[j]);
      if (raw > 0.0f && c.kpos[j] != qp && c.kpos[j] != 0) (*acc)[j] += double(raw);
    }
  }
  float inv = 1.0f;
  const float stat = normalise_row(c.spec.norm, c.n_k, s, n, np, w.z, inv);
  for (int e0 = 0; e0 < n; e0 += kChunk) {
    const int cn = std::min(kChunk, n - e0);
    gather_rows(hr, w, idx + e0, cn);
    gathered_accumulate(hr, w, c.dv, cn, s + e0, 1.0f, w.o.data());
  }
  if (hr.pairs) from_pair_order(w.o.data(), c.dv);
  write_row(c, h, i, w.o.data(), inv, stat);
}

// Least share of a tile's entries that its rows list for the tile to run dense (below it,
// masked work would cost more than gathering the listed entries one by one). A key range runs
// straight from K and V; a union first packs its keys' rows, so it needs more overlap.
constexpr double kRangeMinOverlap = 0.25;
constexpr double kUnionMinOverlap = 0.3;
// Where streamed rows run on bf16 dot products (dp_rows), a kept key costs about three masked
// bf16 tile entries, so tiles need more overlap: 0.4 and 0.6 measured 5-15% faster than 0.25 and
// 0.3 on top-256 and top-1638 lists at N = 4096 and 16384 (union tiles of random lists were the
// slow ones), and 0.5 for ranges no faster.
constexpr double kRangeMinOverlapDp = 0.4;
constexpr double kUnionMinOverlapDp = 0.6;

// Rows i0..i1 (at most kBQ) of head h as one dense tile over the keys their lists name, entries
// a row does not list masked to -inf. Lists that fill most of their key range (a top-k's early
// rows, a large top-k) run over that range in place; lists that share keys spread over a wide
// range (H2O's recent window and heavy set, a shared vertical set) run over the union of their
// keys, packed. Returns false, having done nothing, where the lists overlap too little, score
// modifiers apply (they need each key's position), or nothing is listed. `computed` gets the
// entries computed (tile keys x rows).
bool dense_tile(KernelContext& c, GatherScratch& w, int h, int i0, int i1, int64_t& listed,
                int64_t& computed) {
  using K = Normaliser::Kind;
  if (!c.spec.mods.empty()) return false;
  const IndexLayout& x = c.layout.index(h);
  const int32_t* col = x.col.data();
  const int rows = i1 - i0;
  int64_t total = 0;
  int kmin = c.n_k, kmax = 0;
  for (int i = i0; i < i1; ++i) {
    const int32_t* b = col + x.row_ptr[i];
    const int64_t n = visible_prefix(b, col + x.row_ptr[i + 1], c.lim[i]);
    w.end[i - i0] = x.row_ptr[i] + n;
    total += n;
    if (n > 0) kmin = std::min(kmin, b[0]), kmax = std::max(kmax, b[n - 1] + 1);
  }
  if (total == 0) return false;
  const HeadRows hr = head_rows(c, h);
  const int eb = element_bytes(c.prec);
  const void *kt = nullptr, *vt = nullptr;  // f32 or 16-bit rows
  size_t ldk = 0, ldv = 0;
  int u = 0;
  const bool dp = dpbf16_blocks(c) > 0;
  if (double(total) >= (dp ? kRangeMinOverlapDp : kRangeMinOverlap) * rows * double(kmax - kmin)) {
    // Key range: one membership word per key, K and V read where they are.
    u = kmax - kmin;
    w.member.assign(size_t(u), 0);
    uint64_t* member = w.member.data();
    for (int r = 0; r < rows; ++r) {
      const uint64_t bit = uint64_t(1) << r;
      const int32_t* e1 = col + w.end[r];
      for (const int32_t* e = col + x.row_ptr[i0 + r]; e < e1; ++e) member[*e - kmin] |= bit;
    }
    kt = k_at(c, h, kmin);
    // (Tile products read whole 32-key tiles: V^T up to 31 keys past the range, with p = 0.)
    if (c.bf16_tiles()) c.ensure_vt(h, kmin, kmax + 32);
    vt = c.bf16_tiles() ? static_cast<const void*>(c.vt16_at(h, kmin)) : v_at(c, h, kmin);
    ldk = hr.ldk;
    ldv = c.bf16_tiles() ? c.vt_ld : hr.ldv;
  } else {
    if (w.pos.size() < size_t(c.n_k)) w.pos.assign(size_t(c.n_k), -1);
    w.uni.clear();
    const int64_t cap =
        int64_t(double(total) / ((dp ? kUnionMinOverlapDp : kUnionMinOverlap) * rows)) + 1;
    bool sparse = false;
    for (int r = 0; r < rows && !sparse; ++r)
      for (int64_t e = x.row_ptr[i0 + r]; e < w.end[r]; ++e)
        if (w.pos[col[e]] < 0) {
          w.pos[col[e]] = 0;
          w.uni.push_back(col[e]);
          if (int64_t(w.uni.size()) > cap) {
            sparse = true;
            break;
          }
        }
    if (sparse) {
      for (int32_t j : w.uni) w.pos[j] = -1;
      return false;
    }
    std::sort(w.uni.begin(), w.uni.end());
    u = int(w.uni.size());
    for (int k = 0; k < u; ++k) w.pos[w.uni[k]] = k;
    w.member.assign(size_t(u), 0);
    for (int r = 0; r < rows; ++r)
      for (int64_t e = x.row_ptr[i0 + r]; e < w.end[r]; ++e)
        w.member[size_t(w.pos[col[e]])] |= uint64_t(1) << r;
    for (int32_t j : w.uni) w.pos[j] = -1;
    if (c.bf16_tiles()) {
      // K rows packed with zero rows past the union (whole 16-row tiles), and V^T packed from
      // the V rows (key lists keep them; their V^T is filled only where a range tile reads it).
      const size_t ldt = size_t(u + 31) / 32 * 32 + 32;
      w.kpack16.assign(size_t(u + KernelContext::kPadRows) * c.d, 0);
      w.vtpack.assign(size_t(c.dv) * ldt, 0);
      for (int k = 0; k < u; ++k) {
        std::copy_n(hr.k16 + size_t(w.uni[k]) * hr.ldk, c.d, w.kpack16.data() + size_t(k) * c.d);
        const uint16_t* vrow = hr.v16 + size_t(w.uni[k]) * hr.ldv;
        for (int e = 0; e < c.dv; ++e) w.vtpack[size_t(e) * ldt + k] = vrow[e];
      }
      kt = w.kpack16.data();
      vt = w.vtpack.data();
      ldv = ldt;
    } else if (hr.half) {
      w.kpack16.resize(size_t(u) * c.d);
      w.vpack16.resize(size_t(u) * c.dv);
      for (int k = 0; k < u; ++k) {
        std::copy_n(hr.k16 + size_t(w.uni[k]) * hr.ldk, c.d, w.kpack16.data() + size_t(k) * c.d);
        std::copy_n(hr.v16 + size_t(w.uni[k]) * hr.ldv, c.dv, w.vpack16.data() + size_t(k) * c.dv);
      }
      kt = w.kpack16.data();
      vt = w.vpack16.data();
    } else {
      w.kpack.resize(size_t(u) * c.d);
      w.vpack.resize(size_t(u) * c.dv);
      for (int k = 0; k < u; ++k) {
        std::copy_n(hr.k + size_t(w.uni[k]) * hr.ldk, c.d, w.kpack.data() + size_t(k) * c.d);
        std::copy_n(hr.v + size_t(w.uni[k]) * hr.ldv, c.dv, w.vpack.data() + size_t(k) * c.dv);
      }
      kt = w.kpack.data();
      vt = w.vpack.data();
    }
    ldk = size_t(c.d);
    if (!c.bf16_tiles()) ldv = size_t(c.dv);  // (the packed V^T's stride was set above)
  }

  const Normaliser& norm = c.spec.norm;
  const bool softmax = norm.kind == K::Softmax;
  QueryTile& t = w.tile;
  t.pack(c, h, i0, rows, c.scale * (c.base2_softmax() ? kLog2e : 1.0f));
  const int cols = t.cols;
  const int chunk = c.bf16_tiles() ? kBKTile : kBK;
  w.st.resize(size_t(chunk) * kBQ);
  w.ot.resize(size_t(kBQ) * c.dv);
  std::fill(w.um, w.um + kBQ, kNegInf);
  std::fill(w.ul, w.ul + kBQ, 0.0f);
  vi lane_bit;
  for (int k = 0; k < kVW; ++k) lane_bit[k] = int32_t(1) << k;
  // bf16 tiles: scores as tile products against the packed Q pairs, O^T [dv, kBQ] accumulated
  // from V^T (flash_tile_bf16's scheme).
  const float qscale = c.scale * (c.base2_softmax() ? kLog2e : 1.0f);
  if (c.bf16_tiles()) {
    w.pp.resize(size_t(kBKTile / 2 + 16) * kBQ);
    tiles::begin(c);
  }
  for (int c0 = 0; c0 < u; c0 += chunk) {
    const int nj = std::min(chunk, u - c0);
    if (c.bf16_tiles())
      tiles::qk(c, static_cast<const uint16_t*>(kt) + size_t(c0) * ldk, ldk, nj, t.qp.data(), kBQ,
                cols, qscale, w.st.data(), kBQ);
    else
      qk_any(c, t, static_cast<const char*>(kt) + size_t(c0) * ldk * eb, ldk, nj, w.st.data(), kBQ);
    for (int j = 0; j < nj; ++j) {
      const uint64_t bits = w.member[size_t(c0 + j)];
      float* srow = w.st.data() + size_t(j) * kBQ;
      for (int v = 0; v < cols / kVW; ++v) {
        const int32_t b = int32_t((bits >> (v * kVW)) & ((uint64_t(1) << kVW) - 1));
        const vi keep = (splati(b) & lane_bit) != splati(0);
        storeu(srow + v * kVW, select(keep, loadu(srow + v * kVW), splat(kNegInf)));
      }
    }
    if (softmax) {
      softmax_step(w.st.data(), nj, cols, kBQ, true, w.um, w.ul, w.ualpha);
    } else {
      elementwise_probs(norm, c.n_k, w.st.data(), nj, cols, kBQ);
      if (norm.kind == K::SoftplusL1) add_column_sums(w.st.data(), nj, cols, kBQ, w.ul);
    }
    if (c.bf16_tiles())
      tiles::pv(c, w.st.data(), kBQ, nj, cols, static_cast<const uint16_t*>(vt) + c0, ldv,
                w.ot.data(), kBQ, softmax ? w.ualpha : nullptr, c0 == 0, w.pp.data(), kBQ);
    else
      pv_any(c, t, w.st.data(), kBQ, nj, rows, static_cast<const char*>(vt) + size_t(c0) * ldv * eb,
             ldv, w.ot.data(), c.dv, softmax ? w.ualpha : nullptr, c0 == 0);
  }
  if (c.bf16_tiles()) {
    tiles::end(c);
    w.orow.resize(size_t(c.dv));
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < c.d; ++k) w.orow[size_t(k)] = w.ot[size_t(k) * kBQ + r];
      write_streamed_row(c, h, i0 + r, w.orow.data(), w.um[r], w.ul[r]);
    }
  }
  for (int r = 0; r < rows && !c.bf16_tiles(); ++r)
    write_streamed_row(c, h, i0 + r, w.ot.data() + size_t(r) * c.dv, w.um[r], w.ul[r]);
  listed += total;
  computed += int64_t(u) * rows;
  // The tile's K and V rows once, one index per listed entry; Q, O and the row stat per query.
  c.bytes += int64_t(u) * (c.d + c.dv) * eb + total * 4 + int64_t(rows) * (c.d * (eb + 4) + 4);
  return true;
}

// Queries per streamed tile: enough rows that each K and V row fetched into L2 serves several
// (on the bf16 stream twice as many: 3-6% faster than 128; 512 to 4,096 measured no faster).
constexpr int kTileRows = 128;
constexpr int kTileRowsDp = 256;

}  // namespace

void run_gather(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel) {
  // Selective attention walks each head's rows in order; otherwise rows are independent.
  const bool selective = c.spec.selective;
  const bool whole_rows = selective || c.spec.norm.kind == Normaliser::Kind::Entmax15;
  const int rows = whole_rows ? kRows : dpbf16_blocks(c) > 0 ? kTileRowsDp : kTileRows;
  const int tiles = selective ? 1 : (c.n_q + rows - 1) / rows;
  std::vector<std::unique_ptr<GatherScratch>> scratch(pool.size());
  pool.parallel_for(
      int64_t(c.H) * tiles,
      [&](int64_t item, int wi) {
        if (!scratch[wi]) {
          scratch[wi] = std::make_unique<GatherScratch>();
          scratch[wi]->q.assign(size_t(rows) * c.dv, 0.0f);
          scratch[wi]->o.assign(size_t(rows) * c.dv, 0.0f);
          scratch[wi]->m.resize(rows);
          scratch[wi]->l.resize(rows);
          scratch[wi]->lv.resize(size_t(rows) * kVW);
          scratch[wi]->cur.resize(rows);
          scratch[wi]->end.resize(rows);
          scratch[wi]->s.resize(kChunk);
          scratch[wi]->kp.resize(kChunk);
        }
        GatherScratch& w = *scratch[wi];
        const int h = int(item / tiles);
        const int i0 = selective ? 0 : int(item % tiles) * rows;
        const int i1 = selective ? c.n_q : std::min(c.n_q, i0 + rows);
        if (selective) w.acc.assign(c.n_k, 0.0);
        int64_t entries = 0, listed = 0, computed = 0;
        int row_items = i1 - i0;  // rows the per-entry paths ran
        if (!whole_rows) {
          // Each kBQ rows run as a dense tile where their lists overlap enough; the others as
          // streamed rows, in runs as long as possible (each K and V row fetched serves more).
          row_items = 0;
          int run0 = i0;
          for (int u0 = i0; u0 < i1; u0 += kBQ) {
            const int u1 = std::min(i1, u0 + kBQ);
            if (!dense_tile(c, w, h, u0, u1, listed, computed)) continue;
            if (u0 > run0) run_tile(c, w, h, run0, u0, entries), row_items += u0 - run0;
            run0 = u1;
          }
          if (i1 > run0) run_tile(c, w, h, run0, i1, entries), row_items += i1 - run0;
        }
        for (int i = i0; i < i1 && whole_rows; ++i) {
          if (selective && (i & 63) == 0 && cancel && cancel->load(std::memory_order_relaxed))
            break;
          run_row(c, w, h, i, selective ? &w.acc : nullptr, entries);
        }
        c.qk_entries += entries + computed;
        c.pv_entries += entries + computed;
        // K and V rows plus one index per entry; Q, O and the row stat per query.
        const int64_t eb = element_bytes(c.prec);
        c.bytes +=
            entries * (int64_t(c.d) * 2 * eb + 4) + int64_t(row_items) * (c.d * (eb + 4) + 4);
      },
      cancel);
}

}  // namespace attn::cpu::ATTN_CPU_NS
