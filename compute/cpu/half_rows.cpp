#include "compute/cpu/half_rows.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "compute/cpu/huge_pages.h"
#include "compute/error.h"
#include "compute/half_bits.h"
#include "compute/kv/kv_precision.h"

namespace attn::cpu::ATTN_CPU_NS {

// Named, not anonymous: isa_avx512.cpp compiles every kernel source into one unit.
namespace half_impl {

// f16 bits of x[0..n), rounded to nearest even (overflow gives infinity, as round_fp16 does).
void to_f16(const float* x, uint16_t* out, int n) {
  int i = 0;
#if defined(ATTN_CPU_AVX512)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_mask_cvtps_ph(_mm256_setzero_si256(), __mmask16(0xFFFF),
                                             _mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(ATTN_CPU_AVX2) && defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) {
    out[i] = f16_value_to_bits(round_fp16(x[i]));
  }
}

// bf16 bits of x[0..n), rounded to nearest even.
void to_bf16(const float* x, uint16_t* out, int n, void (*hw)(const float*, uint16_t*, size_t)) {
  if (hw) {
    hw(x, out, size_t(n));
    return;
  }
  for (int i = 0; i < n; ++i) {
    out[i] = bf16_value_to_bits(round_bf16(x[i]));
  }
}

// Keys [j0, j1) of kv head g's V^T (c.vt16, bf16: only bf16 tiles read it) from V in f32: the
// rows converted into tmp, then written out one dimension at a time; the block that ends at n_k
// zeroes the rows' tails.
void fill_vt_block(KernelContext& c, void (*hw_bf16)(const float*, uint16_t*, size_t), int g,
                   int j0, int j1, std::vector<uint16_t>& tmp) {
  const int d = c.d, dv = c.dv;
  tmp.resize(size_t(j1 - j0) * d);
  to_bf16(c.p.v.data() + (size_t(g) * c.n_k + j0) * d, tmp.data(), (j1 - j0) * d, hw_bf16);
  uint16_t* vt = c.vt16.data() + size_t(g) * dv * c.vt_ld;
  for (int k = 0; k < dv; ++k) {
    uint16_t* row = vt + size_t(k) * c.vt_ld;
    if (k >= d) {
      std::fill(row + j0, row + j1, uint16_t(0));
    } else {
      for (int j = j0; j < j1; ++j) row[j] = tmp[size_t(j - j0) * d + k];
    }
    if (j1 == c.n_k) std::fill(row + c.n_k, row + c.vt_ld, uint16_t(0));
  }
}

float max_abs(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

}  // namespace half_impl

void widen_rows(Precision prec, const uint16_t* src, size_t lds, int rows, int n, float* dst,
                size_t ldd) {
  const int full = n / kVW * kVW;
  for (int r = 0; r < rows; ++r) {
    const uint16_t* s = src + size_t(r) * lds;
    float* o = dst + size_t(r) * ldd;
    if (prec == Precision::Bf16)
      for (int k = 0; k < full; k += kVW) storeu(o + k, widen_bf16(s + k));
    else
      for (int k = 0; k < full; k += kVW) storeu(o + k, widen_f16(s + k));
    for (int k = full; k < n; ++k) o[k] = widen1(prec, s[k]);
  }
}

void convert_inputs(KernelContext& c, ThreadPool& pool,
                    void (*hw_bf16)(const float*, uint16_t*, size_t)) {
  using namespace half_impl;
  const Problem& p = c.p;
  const int d = c.d, dv = c.dv;
  const bool f16 = c.prec == Precision::F16;
  const int64_t q_rows = int64_t(c.H) * c.n_q, k_rows = int64_t(p.n_kv_heads) * c.n_k;
  // Every element is written below, so a buffer that grows keeps nothing of its old contents
  // (cleared first: no copy); huge pages, as key lists read K and V rows at random.
  auto storage = [](HalfBuffer& b, size_t n) {
    b.clear();
    resize_huge(b, n);
  };
  storage(c.q16, size_t(q_rows) * d);
  storage(c.k16, size_t(k_rows + KernelContext::kPadRows) * d);
  std::fill(c.k16.begin() + k_rows * d, c.k16.end(), uint16_t(0));
  // V rows for every kernel but bf16-tile flash; V^T for bf16 tiles (key lists on tiles need both:
  // their streamed rows read V rows, their dense tiles V^T).
  const bool v_rows = !c.bf16_tiles() || c.layout.kind == Layout::Kind::Indices;
  if (c.bf16_tiles()) {
    c.vt_ld = size_t(c.n_k + 32 + 31) / 32 * 32;  // whole 32-key tiles stay inside a row
    storage(c.vt16, size_t(p.n_kv_heads) * dv * c.vt_ld);
  }
  // Key lists read V^T only in their dense tiles: filled there, block by block, on first use
  // (a top-256 at N = 16384 reads ~6% of it).
  const bool lazy_vt = c.bf16_tiles() && c.layout.kind == Layout::Kind::Indices;
  if (lazy_vt)
    c.make_vt_lazy([&c, hw_bf16](int g, int j0, int j1) {
      thread_local std::vector<uint16_t> tmp;
      half_impl::fill_vt_block(c, hw_bf16, g, j0, j1, tmp);
    });
  if (v_rows) storage(c.v16, size_t(k_rows) * dv);
  auto convert = [&](const float* x, uint16_t* out, int n) {
    if (f16)
      to_f16(x, out, n);
    else
      to_bf16(x, out, n, hw_bf16);
  };
  // Tasks of kRows rows: Q's, then K's, then V's (per KV head, so V^T blocks stay in one head).
  constexpr int kRows = 256;
  static_assert(kRows == KernelContext::kVtBlock, "a task of V rows fills one block of V^T");
  const int64_t q_tasks = (q_rows + kRows - 1) / kRows, k_tasks = (k_rows + kRows - 1) / kRows;
  const int64_t v_per_head = (c.n_k + kRows - 1) / kRows;
  std::vector<float> worst(size_t(pool.size()), 0.0f);  // largest |x| seen (the f16 range check)
  std::vector<std::vector<uint16_t>> tmp(size_t(pool.size()));
  pool.parallel_for(q_tasks + k_tasks + p.n_kv_heads * v_per_head, [&](int64_t t, int w) {
    const float* src;
    if (t < q_tasks || t < q_tasks + k_tasks) {
      const bool is_q = t < q_tasks;
      const int64_t r0 = (is_q ? t : t - q_tasks) * kRows;
      const int64_t r1 = std::min(is_q ? q_rows : k_rows, r0 + kRows);
      src = (is_q ? p.q.data() : p.k.data()) + r0 * d;
      convert(src, (is_q ? c.q16.data() : c.k16.data()) + r0 * d, int((r1 - r0) * d));
      if (f16) worst[w] = std::max(worst[w], max_abs(src, int((r1 - r0) * d)));
      return;
    }
    const int64_t u = t - q_tasks - k_tasks;
    const int g = int(u / v_per_head);
    const int j0 = int(u % v_per_head) * kRows, j1 = std::min(c.n_k, j0 + kRows);
    src = p.v.data() + (size_t(g) * c.n_k + j0) * d;
    if (f16) worst[w] = std::max(worst[w], max_abs(src, (j1 - j0) * d));
    if (v_rows) {
      uint16_t* out = c.v16.data() + (size_t(g) * c.n_k + j0) * dv;
      for (int j = j0; j < j1; ++j, src += d, out += dv) {
        convert(src, out, d);
        std::fill(out + d, out + dv, uint16_t(0));
      }
    }
    if (c.bf16_tiles() && !lazy_vt) half_impl::fill_vt_block(c, hw_bf16, g, j0, j1, tmp[w]);
  });
  if (f16) {
    const float m = *std::max_element(worst.begin(), worst.end());
    if (m >= 65520.0f)  // rounds to infinity in f16
      throw Error(ErrorCode::InvalidArgument,
                  "precision f16: Q, K or V holds |x| = " + std::to_string(m) +
                      ", beyond f16's largest finite value 65504; use precision bf16 or f32");
  }
}

}  // namespace attn::cpu::ATTN_CPU_NS
