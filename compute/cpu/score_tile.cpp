#include "compute/cpu/score_tile.h"

#include <cmath>

#include "compute/cpu/half_rows.h"
#include "compute/cpu/tile_kernels.h"

namespace attn::cpu::ATTN_CPU_NS {

void QueryTile::pack(const KernelContext& c, int h_, int q0_, int rows_, float qscale_) {
  h = h_;
  q0 = q0_;
  rows = rows_;
  cols = (rows + kVW - 1) / kVW * kVW;
  qscale = qscale_;
  const bool half = c.half();
  if (c.bf16_tiles()) {
    // Pairs of bf16 dims as u32, transposed in kVW x kVW blocks like Q^T below.
    const int dp = c.d / 2, pfull = dp / kVW * kVW;
    qp.resize(size_t(dp) * kBQ);
    for (int i0 = 0; i0 < kBQ; i0 += kVW) {
      for (int k0 = 0; k0 < pfull; k0 += kVW) {
        vf r[kVW];
        for (int x = 0; x < kVW; ++x)
          r[x] = i0 + x < rows
                     ? loadu(reinterpret_cast<const float*>(c.q16_row(h, q0 + i0 + x)) + k0)
                     : vf{};
        transpose(r);
        for (int x = 0; x < kVW; ++x)
          storeu(reinterpret_cast<float*>(qp.data()) + size_t(k0 + x) * kBQ + i0, r[x]);
      }
      for (int k = pfull; k < dp; ++k)
        for (int x = 0; x < kVW; ++x) {
          uint32_t pair = 0;
          if (i0 + x < rows) std::memcpy(&pair, c.q16_row(h, q0 + i0 + x) + 2 * k, 4);
          qp[size_t(k) * kBQ + i0 + x] = pair;
        }
    }
  } else {
    qt.resize(size_t(c.d) * kBQ);
    // Q^T in kVW x kVW blocks transposed in registers; rows past `rows` read as zeros.
    auto q_vec = [&](int i, int k0) {
      return half ? widen(c.prec, c.q16_row(h, i) + k0) : loadu(c.p.q_row(h, i) + k0);
    };
    auto q_one = [&](int i, int k) {
      return half ? widen1(c.prec, c.q16_row(h, i)[k]) : c.p.q_row(h, i)[k];
    };
    const int dfull = c.d / kVW * kVW;
    for (int i0 = 0; i0 < cols; i0 += kVW) {
      for (int k0 = 0; k0 < dfull; k0 += kVW) {
        vf r[kVW];
        for (int x = 0; x < kVW; ++x) r[x] = i0 + x < rows ? q_vec(q0 + i0 + x, k0) * qscale : vf{};
        transpose(r);
        for (int x = 0; x < kVW; ++x) storeu(qt.data() + size_t(k0 + x) * kBQ + i0, r[x]);
      }
      for (int kk = dfull; kk < c.d; ++kk)
        for (int x = 0; x < kVW; ++x)
          qt[size_t(kk) * kBQ + i0 + x] = i0 + x < rows ? q_one(q0 + i0 + x, kk) * qscale : 0.0f;
    }
  }
  for (int v = 0; v < cols / kVW; ++v) {
    for (int e = 0; e < kVW; ++e) {
      int i = v * kVW + e;
      lim[v][e] = i < rows ? c.lim[q0 + i] : 0;
      qposf[v][e] = i < rows ? float(c.qpos[q0 + i]) : 0.0f;
      qposi[v][e] = i < rows ? c.qpos[q0 + i] : 0;
    }
  }
  lim_lo = c.lim[q0];
  lim_hi = c.lim[q0 + rows - 1];
}

const void* k_at(const KernelContext& c, int h, int j) {
  return c.half() ? static_cast<const void*>(c.k16_row(h, j)) : c.p.k_row(h, j);
}

const void* v_at(const KernelContext& c, int h, int j) {
  return c.half() ? static_cast<const void*>(c.v16_row(h, j)) : c.v_row(h, j);
}

void qk_any(const KernelContext& c, const QueryTile& t, const void* k, size_t ldk, int nj,
            float* st, int lds) {
  if (!c.half()) {
    qk_tile(static_cast<const float*>(k), ldk, nj, t.qt.data(), kBQ, t.cols, c.d, st, lds);
    return;
  }
  // Widened once per chunk, then used by every query of the tile.
  if (t.kw.size() < size_t(nj) * c.d) t.kw.resize(size_t(kBK) * c.d);
  widen_rows(c.prec, static_cast<const uint16_t*>(k), ldk, nj, c.d, t.kw.data(), size_t(c.d));
  qk_tile(t.kw.data(), size_t(c.d), nj, t.qt.data(), kBQ, t.cols, c.d, st, lds);
}

void pv_any(const KernelContext& c, const QueryTile& t, const float* pt, int ldp, int nj, int rows,
            const void* v, size_t ldv, float* o, int ldo, const float* alpha, bool init) {
  if (!c.half()) {
    pv_tile(pt, ldp, nj, rows, static_cast<const float*>(v), ldv, c.dv, o, ldo, alpha, init);
    return;
  }
  if (t.vw.size() < size_t(nj) * c.dv) t.vw.resize(size_t(std::max(nj, kBK)) * c.dv);
  widen_rows(c.prec, static_cast<const uint16_t*>(v), ldv, nj, c.dv, t.vw.data(), size_t(c.dv));
  pv_tile(pt, ldp, nj, rows, t.vw.data(), size_t(c.dv), c.dv, o, ldo, alpha, init);
}

void score_chunk(const KernelContext& c, const QueryTile& t, const Chunk& ch, bool to_base2,
                 float* st, int lds) {
  qk_any(c, t, k_at(c, t.h, ch.j0), k_ld(c), ch.nj, st, lds);
  finish_scores(c, t, ch, to_base2, st, lds);
}

void finish_scores(const KernelContext& c, const QueryTile& t, const Chunk& ch, bool to_base2,
                   float* st, int lds) {
  const int nv = t.cols / kVW;
  for (const ScoreMod& m : c.spec.mods) {
    switch (m.kind) {
      case ScoreMod::Kind::Temperature: {
        const vf temp = splat(m.a);
        for (int j = 0; j < ch.nj; ++j)
          for (int v = 0; v < nv; ++v) {
            float* s = st + size_t(j) * lds + v * kVW;
            storeu(s, loadu(s) / temp);
          }
        break;
      }
      case ScoreMod::Kind::Alibi: {
        const float slope = std::exp2(-m.a * float(t.h + 1) / float(c.H));
        for (int j = 0; j < ch.nj; ++j) {
          const vf kp = splat(float(c.kpos[ch.j0 + j]));
          for (int v = 0; v < nv; ++v) {
            float* s = st + size_t(j) * lds + v * kVW;
            storeu(s, loadu(s) - slope * (t.qposf[v] - kp));
          }
        }
        break;
      }
      case ScoreMod::Kind::Softcap: {
        const vf cap = splat(m.a);
        for (int j = 0; j < ch.nj; ++j)
          for (int v = 0; v < nv; ++v) {
            float* s = st + size_t(j) * lds + v * kVW;
            storeu(s, cap * tanhv(loadu(s) / cap));
          }
        break;
      }
    }
  }
  if (to_base2 && !c.spec.mods.empty()) {
    for (int j = 0; j < ch.nj; ++j)
      for (int v = 0; v < nv; ++v) {
        float* s = st + size_t(j) * lds + v * kVW;
        storeu(s, loadu(s) * kLog2e);
      }
  }
  // Padding columns have lim 0, so the causal pass also drops them; do it whenever padding exists.
  if (ch.causal || t.cols != t.rows) {
    const vf ninf = splat(kNegInf);
    for (int j = 0; j < ch.nj; ++j) {
      const vi key = splati(ch.j0 + j);
      for (int v = 0; v < nv; ++v) {
        float* s = st + size_t(j) * lds + v * kVW;
        storeu(s, select(key < t.lim[v], loadu(s), ninf));
      }
    }
  }
  if (ch.partial && c.layout.mask) {
    const Mask& mask = *c.layout.mask;
    const int32_t* qp = c.qpos.data() + t.q0;
    // Queries at consecutive positions (the default): the mask drops whole runs of a column.
    bool consecutive = true;
    for (int i = 1; i < t.rows && consecutive; ++i) consecutive = qp[i] == qp[i - 1] + 1;
    for (int j = 0; j < ch.nj; ++j) {
      const int32_t kp = c.kpos[ch.j0 + j];
      float* s = st + size_t(j) * lds;
      if (consecutive) {
        mask.drop_column(qp[0], kp, t.rows, s);
        continue;
      }
      for (int i = 0; i < t.rows; ++i)
        if (!mask.keep(qp[i], kp)) s[i] = kNegInf;
    }
  }
}

void apply_mods_row(const KernelContext& c, int h, int32_t qp, const float* kp, float* s, int n) {
  for (const ScoreMod& m : c.spec.mods) {
    switch (m.kind) {
      case ScoreMod::Kind::Temperature:
        for (int x = 0; x < n; x += kVW) storeu(s + x, loadu(s + x) / splat(m.a));
        break;
      case ScoreMod::Kind::Alibi: {
        const float slope = std::exp2(-m.a * float(h + 1) / float(c.H));
        const vf q = splat(float(qp));
        for (int x = 0; x < n; x += kVW) storeu(s + x, loadu(s + x) - slope * (q - loadu(kp + x)));
        break;
      }
      case ScoreMod::Kind::Softcap: {
        const vf cap = splat(m.a);
        for (int x = 0; x < n; x += kVW) storeu(s + x, cap * tanhv(loadu(s + x) / cap));
        break;
      }
    }
  }
}

void elementwise_probs(const Normaliser& n, int n_k, float* st, int nj, int cols, int lds) {
  using K = Normaliser::Kind;
  const int nv = cols / kVW;
  const vf zero = splat(0.0f);
  const vf ninf = splat(kNegInf);
  if (n.kind == K::Sigmoid) {
    // sigmoid(s + b) = 1 / (1 + 2^(-(s + b) log2 e)), b = a - log(n_k)
    const float b = n.a - std::log(float(n_k));
    for (int j = 0; j < nj; ++j)
      for (int v = 0; v < nv; ++v) {
        float* p = st + size_t(j) * lds + v * kVW;
        vf s = loadu(p);
        vf e = exp2v((s + b) * -kLog2e);
        storeu(p, select(s == ninf, zero, 1.0f / (1.0f + e)));
      }
  } else if (n.kind == K::Relu) {
    const float inv_n = 1.0f / float(n_k);
    for (int j = 0; j < nj; ++j) {
      float* p = st + size_t(j) * lds;
      if (n.a == 1.0f) {
        for (int v = 0; v < nv; ++v) storeu(p + v * kVW, vmax(loadu(p + v * kVW), zero) * inv_n);
      } else if (n.a == 2.0f) {
        for (int v = 0; v < nv; ++v) {
          vf r = vmax(loadu(p + v * kVW), zero);
          storeu(p + v * kVW, r * r * inv_n);
        }
      } else {
        for (int i = 0; i < cols; ++i)
          p[i] = p[i] == kNegInf ? 0.0f : std::pow(std::max(p[i], 0.0f), n.a) * inv_n;
      }
    }
  } else if (n.kind == K::SoftplusL1) {
    // softplus(s) = max(s, 0) + log(1 + e^-|s|), the exponent at most 0 so nothing overflows.
    for (int j = 0; j < nj; ++j) {
      float* p = st + size_t(j) * lds;
      for (int v = 0; v < nv; ++v) {
        const vf s = loadu(p + v * kVW);
        const vf e = exp2v(vmin(s, -s) * kLog2e);
        storeu(p + v * kVW, select(s == ninf, zero, vmax(s, zero) + log1p_unitv(e)));
      }
      for (int i = nv * kVW; i < cols; ++i) {
        const float s = p[i];
        p[i] = s == kNegInf ? 0.0f : std::max(s, 0.0f) + std::log1p(std::exp(-std::fabs(s)));
      }
    }
  }
}

void softmax_step(float* st, int nj, int cols, int lds, bool masked, float* m, float* l,
                  float* alpha, const float* chunk_max) {
  for (int v = 0; v < cols / kVW; ++v) {
    const vf m_old = loadu(m + v * kVW);
    vf mx = m_old;
    if (chunk_max)
      mx = vmax(mx, loadu(chunk_max + v * kVW));
    else
      for (int j = 0; j < nj; ++j) mx = vmax(mx, loadu(st + size_t(j) * lds + v * kVW));
    const vf m_use = select(mx == splat(kNegInf), splat(0.0f), mx);
    const vf a = exp2v(m_old - m_use);
    vf sum = vf{};
    for (int j = 0; j < nj; ++j) {
      float* p = st + size_t(j) * lds + v * kVW;
      vf e = masked ? exp2v(loadu(p) - m_use) : exp2v_nonpos(loadu(p) - m_use);
      storeu(p, e);
      sum += e;
    }
    storeu(l + v * kVW, fmadd(loadu(l + v * kVW), a, sum));
    storeu(alpha + v * kVW, a);
    storeu(m + v * kVW, mx);
  }
}

bool any_nonzero(const float* st, int nj, int cols, int lds) {
  vi any = vi{};
  for (int j = 0; j < nj; ++j)
    for (int v = 0; v < cols / kVW; ++v) any |= loadu(st + size_t(j) * lds + v * kVW) != 0.0f;
  for (int e = 0; e < kVW; ++e)
    if (any[e]) return true;
  return false;
}

void add_column_sums(const float* st, int nj, int cols, int lds, float* sum) {
  const int nv = cols / kVW;
  for (int v = 0; v < nv; ++v) {
    vf acc = vf{};  // the chunk's own sum first: two-level summation over long rows
    for (int j = 0; j < nj; ++j) acc += loadu(st + size_t(j) * lds + v * kVW);
    storeu(sum + v * kVW, loadu(sum + v * kVW) + acc);
  }
}

void normalise_buffered(const Normaliser& n, int n_k, float* st, size_t total, int rows, int cols,
                        float* stat, float* inv, EntmaxScratch& es) {
  using K = Normaliser::Kind;
  if (n.kind == K::Softmax) {
    for (int v = 0; v < cols / kVW; ++v) {
      vf mx = splat(kNegInf);
      for (size_t j = 0; j < total; ++j) mx = vmax(mx, loadu(st + j * kBQ + v * kVW));
      const vf m_use = select(mx == splat(kNegInf), splat(0.0f), mx);
      // Two-level sum (per kBK keys, then across) keeps float rounding small on long rows.
      vf sum = vf{};
      for (size_t j0 = 0; j0 < total; j0 += kBK) {
        vf part = vf{};
        for (size_t j = j0; j < std::min(total, j0 + kBK); ++j) {
          float* p = st + j * kBQ + v * kVW;
          vf e = exp2v((loadu(p) - m_use) * kLog2e);
          storeu(p, e);
          part += e;
        }
        sum += part;
      }
      for (int e = 0; e < kVW; ++e) {
        const int i = v * kVW + e;
        if (i >= rows) break;
        stat[i] = sum[e] > 0 ? m_use[e] + std::log(sum[e]) : 0.0f;
        inv[i] = sum[e] > 0 ? 1.0f / sum[e] : 0.0f;
      }
    }
  } else if (n.kind == K::Entmax15) {
    // tau >= max z - 1, so only entries with z > max z - 1 (s > max s - 2) can be non-zero: one
    // vector pass finds each query's max, one collects those few candidates, and the column is
    // then zeroed and the candidates' probabilities written back.
    for (int v = 0; v < cols / kVW; ++v) {
      vf mx = splat(kNegInf);
      for (size_t j = 0; j < total; ++j) mx = vmax(mx, loadu(st + j * kBQ + v * kVW));
      const vf thr = mx - 2.0f;
      for (int e = 0; e < kVW; ++e) es.cand[e].clear();
      for (size_t j = 0; j < total; ++j) {
        const vf x = loadu(st + j * kBQ + v * kVW);
        const vi hit = x > thr;
        bool any = false;
        for (int e = 0; e < kVW; ++e) any |= hit[e] != 0;
        if (!any) continue;
        for (int e = 0; e < kVW; ++e)
          if (hit[e]) es.cand[e].push_back({int32_t(j), 0.5 * double(x[e])});
      }
      for (int e = 0; e < kVW; ++e) {
        const int i = v * kVW + e;
        auto& cand = es.cand[e];
        es.z.resize(cand.size());
        for (size_t x = 0; x < cand.size(); ++x) es.z[x] = cand[x].second;
        const double tau = entmax15_tau(es.z);
        for (auto& c : cand)
          c.second = std::max(c.second - tau, 0.0) * std::max(c.second - tau, 0.0);
        if (i < rows) {
          stat[i] = float(tau);
          inv[i] = cand.empty() ? 0.0f : 1.0f;
        }
      }
      for (size_t j = 0; j < total; ++j) storeu(st + j * kBQ + v * kVW, vf{});
      for (int e = 0; e < kVW; ++e)
        for (const auto& c : es.cand[e]) st[size_t(c.first) * kBQ + v * kVW + e] = float(c.second);
    }
  } else {
    alignas(64) float sum[kBQ] = {};
    for (size_t j = 0; j < total; j += kBK) {
      const int nj = int(std::min<size_t>(kBK, total - j));
      elementwise_probs(n, n_k, st + j * kBQ, nj, cols, kBQ);
      if (n.kind == K::SoftplusL1) add_column_sums(st + j * kBQ, nj, cols, kBQ, sum);
    }
    for (int i = 0; i < rows; ++i) {
      if (n.kind == K::SoftplusL1) {
        stat[i] = sum[i] > 0 ? std::log(sum[i]) : 0.0f;
        inv[i] = sum[i] > 0 ? 1.0f / sum[i] : 0.0f;
      } else {
        stat[i] = 0.0f;
        inv[i] = 1.0f;
      }
    }
  }
}

double entmax15_tau(std::vector<double>& z) {
  if (z.empty()) return 0.0;
  const double zmax = *std::max_element(z.begin(), z.end());
  // f(tau) = sum [z - tau]_+^2 - 1 is convex and decreasing, and f(max z - 1) >= 0, so Newton
  // steps from there rise monotonically to the root; once they settle, the root is solved in
  // closed form on the support {z > tau}: k tau^2 - 2 S1 tau + S2 - 1 = 0 (smaller root).
  double tau = zmax - 1.0;
  for (int it = 0; it < 64; ++it) {
    double f = -1.0, g = 0.0;
    for (double x : z) {
      const double r = x > tau ? x - tau : 0.0;
      f += r * r;
      g += r;
    }
    const double step = f / (2.0 * g);
    tau += step;
    if (step <= 1e-12 * (1.0 + std::fabs(tau))) break;
  }
  double s1 = 0, s2 = 0;
  int k = 0;
  for (double x : z)
    if (x > tau - 1e-9) {
      s1 += x;
      s2 += x * x;
      ++k;
    }
  const double disc = s1 * s1 - k * (s2 - 1.0);
  const double exact = disc >= 0 ? (s1 - std::sqrt(disc)) / k : tau;
  // Keep the closed form only when it is consistent with its support (else Newton's value).
  return std::fabs(exact - tau) <= 1e-6 * (1.0 + std::fabs(tau)) ? exact : tau;
}

}  // namespace attn::cpu::ATTN_CPU_NS
