#include "compute/kv/kv_attend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "compute/error.h"
#include "compute/kv/kv_kernels.h"
#include "compute/parallel.h"

namespace attn {

namespace {

using kv_detail::Kernels;

const Kernels* avx512_runs() {
  const Kernels* k = kv_detail::avx512_kernels_if_built();
#if defined(__GNUC__) && defined(__x86_64__)
  if (k && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return k;
#endif
  return nullptr;
}

std::vector<const Kernels*> available() {
  std::vector<const Kernels*> v;
  if (const Kernels* k = avx512_runs()) v.push_back(k);
  v.push_back(&kv_detail::baseline_kernels());
  return v;
}

const Kernels& pick(const char* isa) {
  const std::vector<const Kernels*> all = available();
  const char* want = isa ? isa : std::getenv("ATTNSCOPE_CPU_ISA");
  if (!want || !*want) return *all.front();
  for (const Kernels* k : all)
    if (std::string(want) == k->isa) return *k;
  // "avx2" and "generic" name the baseline whatever it was built for (as compute/cpu does).
  if (std::string(want) == "avx2" || std::string(want) == "generic") return *all.back();
  require(isa == nullptr, ErrorCode::InvalidArgument,
          std::string("KV attention: instruction set '") + want + "' does not run here");
  return *all.front();
}

void check_shapes(const KvRows& k, const KvRows& v, int len, int H) {
  require(k.heads() == v.heads() && k.dim() == v.dim() && k.heads() > 0 && H % k.heads() == 0,
          ErrorCode::InvalidArgument, "KV attention: K and V rows and query heads disagree");
  require(len >= 1 && len <= k.capacity() && len <= v.capacity(), ErrorCode::InvalidArgument,
          "KV attention: " + std::to_string(len) + " rows of " + std::to_string(k.capacity()));
}

}  // namespace

std::vector<std::string> kv_kernel_isas() {
  std::vector<std::string> v;
  for (const Kernels* k : available()) v.push_back(k->isa);
  return v;
}

void kv_decode_rows(const KvRows& rows, int head, const int32_t* idx, int n, float* out,
                    const char* isa) {
  require(head >= 0 && head < rows.heads(), ErrorCode::InvalidArgument,
          "KV rows: head " + std::to_string(head) + " of " + std::to_string(rows.heads()));
  for (int i = 0; i < n; ++i)
    require(idx[i] >= 0 && idx[i] < rows.capacity(), ErrorCode::InvalidArgument,
            "KV rows: row " + std::to_string(idx[i]) + " of " + std::to_string(rows.capacity()));
  pick(isa).decode(rows, head, idx, n, out);
}

std::string kv_best_isa() {
  return pick(nullptr).isa;
}

void kv_attend_rows(const KvRows& k, const KvRows& v, int len, const float* q, int H, float scale,
                    const KvRope* rope, float* out, float* probs, int threads, const char* isa) {
  check_shapes(k, v, len, H);
  const Kernels& kern = pick(isa);
  const int hkv = k.heads(), d = k.dim(), G = H / hkv, dp = (d + 15) / 16 * 16;
  const int nc = (len + kKvChunkRows - 1) / kKvChunkRows;
  std::vector<float> qp(size_t(H) * dp, 0.0f);  // f32 [H, dp]
  for (int h = 0; h < H; ++h) std::copy_n(q + size_t(h) * d, d, qp.data() + size_t(h) * dp);
  std::vector<float> s(size_t(H) * len);                    // f32 [H, len]: exp(score - m_chunk)
  std::vector<float> m(size_t(hkv) * nc * G), l(m.size());  // [H_kv, chunks, G]
  std::vector<float> acc(m.size() * dp);                    // f32 [H_kv, chunks, G, dp]
  // Chunk by chunk, every KV head of a chunk in turn: the heads' rows of one chunk share their
  // positions, so its slice of the rotary table (512 B a row at d = 128) is read into cache once
  // for all of them (head by head it was fetched again per head: a decode step's cache part
  // took 22% longer with 4-bit keys, 12% with f32).
  parallel_for(
      hkv * nc,
      [&](int item) {
        const int g = item % hkv, c = item / hkv, t = g * nc + c;
        kv_detail::ChunkArgs a;
        a.k = &k;
        a.v = &v;
        a.q = qp.data() + size_t(g) * G * dp;
        a.G = G;
        a.d = d;
        a.dp = dp;
        a.scale = scale;
        if (rope && rope->table) {
          a.rope = rope->table;
          a.target = rope->target + size_t(g) * rope->target_stride;
        }
        a.g = g;
        a.r0 = c * kKvChunkRows;
        a.r1 = std::min(len, a.r0 + kKvChunkRows);
        a.s = s.data() + size_t(g) * G * len;
        a.s_stride = len;
        a.m = m.data() + size_t(t) * G;
        a.l = l.data() + size_t(t) * G;
        a.acc = acc.data() + size_t(t) * G * dp;
        kern.chunk(a);
      },
      threads);
  // Merge the chunks of each query head, in chunk order.
  std::vector<float> w(static_cast<size_t>(nc));
  for (int h = 0; h < H; ++h) {
    const int g = h / G, j = h % G;
    const auto at = [&](int c) { return (size_t(g) * nc + c) * G + j; };
    float mx = -INFINITY;
    for (int c = 0; c < nc; ++c) mx = std::max(mx, m[at(c)]);
    float sum = 0;
    for (int c = 0; c < nc; ++c) {
      w[size_t(c)] = std::exp(m[at(c)] - mx);
      sum += w[size_t(c)] * l[at(c)];
    }
    const float inv = 1.0f / sum;
    float* o = out + size_t(h) * d;
    for (int e = 0; e < d; ++e) {
      float x = 0;
      for (int c = 0; c < nc; ++c) x += w[size_t(c)] * acc[at(c) * dp + e];
      o[e] = x * inv;
    }
    if (!probs) continue;
    const float* sp = s.data() + (size_t(g) * G + j) * len;
    float* pr = probs + size_t(h) * len;
    for (int r = 0; r < len; ++r) pr[r] = sp[r] * (w[size_t(r / kKvChunkRows)] * inv);
  }
}

void kv_attend_rows_reference(const KvRows& k, const KvRows& v, int len, const float* q, int H,
                              float scale, const KvRope* rope, double* out, double* probs) {
  check_shapes(k, v, len, H);
  const int hkv = k.heads(), d = k.dim(), G = H / hkv, half = d / 2;
  std::vector<float> row(static_cast<size_t>(d));
  std::vector<double> kd(size_t(len) * d), vd(kd.size()), p(static_cast<size_t>(len));
  for (int g = 0; g < hkv; ++g) {
    for (int r = 0; r < len; ++r) {
      k.decode(g, r, row.data());
      double* kr = kd.data() + size_t(r) * d;
      for (int c = 0; c < d; ++c) kr[c] = row[size_t(c)];
      if (rope && rope->table) {
        const float* cs =
            rope->table + size_t(rope->target[size_t(g) * rope->target_stride + r]) * d;
        for (int i = 0; i < half; ++i) {
          const double a = kr[i], b = kr[i + half], c = cs[i], s = cs[half + i];
          kr[i] = a * c - b * s;
          kr[i + half] = b * c + a * s;
        }
      }
      v.decode(g, r, row.data());
      for (int c = 0; c < d; ++c) vd[size_t(r) * d + c] = row[size_t(c)];
    }
    for (int h = g * G; h < (g + 1) * G; ++h) {
      double mx = -INFINITY;
      for (int r = 0; r < len; ++r) {
        double x = 0;
        for (int c = 0; c < d; ++c) x += double(q[size_t(h) * d + c]) * kd[size_t(r) * d + c];
        p[size_t(r)] = x * double(scale);
        mx = std::max(mx, p[size_t(r)]);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int c = 0; c < d; ++c) out[size_t(h) * d + c] = 0;
      for (int r = 0; r < len; ++r) {
        p[size_t(r)] /= sum;
        if (probs) probs[size_t(h) * len + r] = p[size_t(r)];
        for (int c = 0; c < d; ++c) out[size_t(h) * d + c] += p[size_t(r)] * vd[size_t(r) * d + c];
      }
    }
  }
}

}  // namespace attn
