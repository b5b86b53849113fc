#include "compute/cpu/gather_kernel.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "compute/cpu/score_tile.h"
#include "compute/cpu/simd.h"

namespace attn::cpu::ATTN_CPU_NS {

namespace {

constexpr int kRows = 16;   // queries per work item
constexpr int kChunk = 64;  // keys per chunk (a multiple of kVW)

struct GatherScratch {
  std::vector<float> q;   // f32 [dv]: scaled query, zero padded
  std::vector<float> o;   // f32 [dv]: output accumulator
  std::vector<float> s;   // f32 [keys]: scores of one chunk, or of a whole row (entmax)
  std::vector<float> kp;  // f32 [keys]: key positions (ALiBi)
  std::vector<double> z;
  std::vector<double> acc;  // f64 [n_k]: selective attention's accumulator
};

void prefetch_row(const float* row, int n) {
  for (int k = 0; k < n; k += 16) __builtin_prefetch(row + k);
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

// Scores of query q against keys idx[0..n) into s[0..np) (np = n rounded up; padding -inf).
void score_keys(const KernelContext& c, GatherScratch& w, int h, int i, const int32_t* idx, int n,
                bool to_base2, float* s, float* kp) {
  const int np = (n + kVW - 1) / kVW * kVW;
  const float* rows[kVW];
  for (int g = 0; g < np; g += kVW) {
    for (int x = 0; x < kVW; ++x) rows[x] = c.p.k_row(h, idx[std::min(g + x, n - 1)]);
    // The gathered rows come from anywhere in K: fetch the next group's while this one runs.
    for (int x = g + kVW; x < std::min(g + 2 * kVW, n); ++x)
      prefetch_row(c.p.k_row(h, idx[x]), c.d);
    storeu(s + g, dots(w.q.data(), rows, c.d));
  }
  if (!c.spec.mods.empty()) {  // key positions only for the modifiers
    for (int x = 0; x < np; ++x) kp[x] = float(c.kpos[idx[std::min(x, n - 1)]]);
    apply_mods_row(c, h, c.qpos[i], kp, s, np);
    if (to_base2)
      for (int x = 0; x < np; x += kVW) storeu(s + x, loadu(s + x) * kLog2e);
  }
  for (int x = n; x < np; ++x) s[x] = kNegInf;
}

// o[0..dv) += sum_x p[x] V[idx[x]], with o held in registers for the common widths (two sets
// of accumulators, even and odd keys, to hide FMA latency).
template <int NV>
void accumulate_v_fixed(const KernelContext& c, int h, const int32_t* idx, int n, const float* p,
                        float* o) {
  vf acc[2][NV];
  for (int v = 0; v < NV; ++v) {
    acc[0][v] = loadu(o + v * kVW);
    acc[1][v] = vf{};
  }
  int x = 0;
  for (; x + 1 < n; x += 2) {
    if (x + 8 < n) prefetch_row(c.v_row(h, idx[x + 8]), NV * kVW);
    if (x + 9 < n) prefetch_row(c.v_row(h, idx[x + 9]), NV * kVW);
    const vf a0 = splat(p[x]), a1 = splat(p[x + 1]);
    const float* r0 = c.v_row(h, idx[x]);
    const float* r1 = c.v_row(h, idx[x + 1]);
    for (int v = 0; v < NV; ++v) {
      acc[0][v] = fmadd(a0, loadu(r0 + v * kVW), acc[0][v]);
      acc[1][v] = fmadd(a1, loadu(r1 + v * kVW), acc[1][v]);
    }
  }
  if (x < n) {
    const vf a = splat(p[x]);
    const float* r = c.v_row(h, idx[x]);
    for (int v = 0; v < NV; ++v) acc[0][v] = fmadd(a, loadu(r + v * kVW), acc[0][v]);
  }
  for (int v = 0; v < NV; ++v) storeu(o + v * kVW, acc[0][v] + acc[1][v]);
}

void accumulate_v(const KernelContext& c, int h, const int32_t* idx, int n, const float* p,
                  float* o) {
  switch (c.dv / kVW) {
    case 1:
      return accumulate_v_fixed<1>(c, h, idx, n, p, o);
    case 2:
      return accumulate_v_fixed<2>(c, h, idx, n, p, o);
    case 3:
      return accumulate_v_fixed<3>(c, h, idx, n, p, o);
    case 4:
      return accumulate_v_fixed<4>(c, h, idx, n, p, o);
    case 5:
      return accumulate_v_fixed<5>(c, h, idx, n, p, o);
    case 6:
      return accumulate_v_fixed<6>(c, h, idx, n, p, o);
    case 8:
      return accumulate_v_fixed<8>(c, h, idx, n, p, o);
    default:
      for (int x = 0; x < n; ++x) {
        const vf a = splat(p[x]);
        const float* v = c.v_row(h, idx[x]);
        for (int k = 0; k < c.dv; k += kVW) storeu(o + k, fmadd(a, loadu(v + k), loadu(o + k)));
      }
  }
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

// One query row. `acc` (selective attention) is the head's accumulator, else null.
void run_row(KernelContext& c, GatherScratch& w, int h, int i, std::vector<double>* acc,
             int64_t& entries) {
  using K = Normaliser::Kind;
  const Normaliser& norm = c.spec.norm;
  const IndexLayout& x = c.layout.index(h);
  const int32_t* idx = x.col.data() + x.row_ptr[i];
  // Listed keys are ascending, so the causally visible ones are a prefix.
  const int n = int(std::lower_bound(idx, x.col.data() + x.row_ptr[i + 1], c.lim[i]) - idx);
  const bool base2 = c.base2_softmax();
  const float qscale = c.scale * (base2 ? kLog2e : 1.0f);
  const float* q = c.p.q_row(h, i);
  for (int k = 0; k < c.d; ++k) w.q[k] = q[k] * qscale;
  std::fill(w.o.begin(), w.o.end(), 0.0f);
  float stat = 0.0f, inv = 1.0f;
  entries += n;

  if (norm.kind == K::Entmax15 || acc) {
    // The whole row at once: entmax needs its threshold, selective its accumulator.
    const int np = (n + kVW - 1) / kVW * kVW;
    if (int(w.s.size()) < np) {
      w.s.resize(np);
      w.kp.resize(np);
    }
    float* s = w.s.data();
    score_keys(c, w, h, i, idx, n, false, s, w.kp.data());
    if (acc) {
      const int32_t qp = c.qpos[i];
      for (int e = 0; e < n; ++e) {
        const int j = idx[e];
        const float raw = s[e];
        s[e] = float(double(raw) - (*acc)[j]);
        if (raw > 0.0f && c.kpos[j] != qp && c.kpos[j] != 0) (*acc)[j] += double(raw);
      }
    }
    stat = normalise_row(norm, c.n_k, s, n, np, w.z, inv);
    accumulate_v(c, h, idx, n, s, w.o.data());
  } else {
    float m = kNegInf, l = 0.0f;
    float* s = w.s.data();
    for (int e0 = 0; e0 < n; e0 += kChunk) {
      const int cn = std::min(kChunk, n - e0);
      const int np = (cn + kVW - 1) / kVW * kVW;
      score_keys(c, w, h, i, idx + e0, cn, norm.kind == K::Softmax, s, w.kp.data());
      if (norm.kind == K::Softmax) {
        float mx = m;
        for (int e = 0; e < cn; ++e) mx = std::max(mx, s[e]);
        const float m_use = mx == kNegInf ? 0.0f : mx;
        const float alpha = std::exp2(m - m_use);
        vf sum = vf{};
        for (int e = 0; e < np; e += kVW) {
          vf p = exp2v(loadu(s + e) - m_use);
          storeu(s + e, p);
          sum += p;
        }
        l = l * alpha + hsum(sum);
        m = mx;
        if (alpha != 1.0f)
          for (int k = 0; k < c.dv; k += kVW) storeu(w.o.data() + k, loadu(w.o.data() + k) * alpha);
      } else {
        elementwise_probs(norm, c.n_k, s, 1, np, np);
        if (norm.kind == K::SoftplusL1)
          for (int e = 0; e < cn; ++e) l += s[e];
      }
      accumulate_v(c, h, idx + e0, cn, s, w.o.data());
    }
    if (norm.kind == K::Softmax || norm.kind == K::SoftplusL1) {
      inv = l > 0.0f ? 1.0f / l : 0.0f;
      if (l > 0.0f)
        // Softmax runs in base 2 (scores were multiplied by log2 e): lse = (m2 + log2 l) ln 2.
        stat = norm.kind == K::Softmax ? (m + std::log2(l)) * kLn2 : std::log(l);
    }
  }
  float* out = c.o + (size_t(h) * c.n_q + i) * c.d;
  for (int k = 0; k < c.d; ++k) out[k] = w.o[k] * inv;
  c.row_stat[size_t(h) * c.n_q + i] = stat;
}

}  // namespace

void run_gather(KernelContext& c, ThreadPool& pool, const std::atomic<bool>* cancel) {
  // Selective attention walks each head's rows in order; otherwise rows are independent.
  const bool selective = c.spec.selective;
  const int tiles = selective ? 1 : (c.n_q + kRows - 1) / kRows;
  std::vector<std::unique_ptr<GatherScratch>> scratch(pool.size());
  pool.parallel_for(
      int64_t(c.H) * tiles,
      [&](int64_t item, int wi) {
        if (!scratch[wi]) {
          scratch[wi] = std::make_unique<GatherScratch>();
          scratch[wi]->q.assign(c.dv, 0.0f);
          scratch[wi]->o.assign(c.dv, 0.0f);
          scratch[wi]->s.resize(kChunk);
          scratch[wi]->kp.resize(kChunk);
        }
        GatherScratch& w = *scratch[wi];
        const int h = int(item / tiles);
        const int i0 = selective ? 0 : int(item % tiles) * kRows;
        const int i1 = selective ? c.n_q : std::min(c.n_q, i0 + kRows);
        if (selective) w.acc.assign(c.n_k, 0.0);
        int64_t entries = 0;
        for (int i = i0; i < i1; ++i) {
          if (selective && (i & 63) == 0 && cancel && cancel->load(std::memory_order_relaxed))
            break;
          run_row(c, w, h, i, selective ? &w.acc : nullptr, entries);
        }
        c.qk_entries += entries;
        c.pv_entries += entries;
        // K and V rows plus one index per entry; Q, O and the row stat per query.
        c.bytes += entries * (int64_t(c.d) * 8 + 4) + int64_t(i1 - i0) * (c.d * 8 + 4);
      },
      cancel);
}

}  // namespace attn::cpu::ATTN_CPU_NS
