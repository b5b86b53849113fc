#include "models/arch/layers.h"

#include <Eigen/Core>
#include <algorithm>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstdint>
#include <unsupported/Eigen/SpecialFunctions>
#include <vector>

#include "compute/cpu/gemm.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/weights.h"

namespace attn::models {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;
using ArrMap = Eigen::Map<Eigen::ArrayXf>;

// Splits [0, count) into about per_thread pieces a thread, of at least `min_piece` (a multiple
// of 16).
int piece_size(size_t count, int threads, size_t min_piece, int per_thread) {
  const size_t parts = size_t(threads) * size_t(per_thread);
  size_t per = (count + parts - 1) / parts;
  per = std::max(min_piece, (per + 15) / 16 * 16);
  return int(std::min(per, std::max<size_t>(count, 1)));
}

// Calls fn(begin, end) over [0, count) in pieces on `threads` threads, taken as threads free up.
template <typename Fn>
void parallel_ranges(size_t count, int threads, size_t min_piece, Fn fn, int per_thread = 4) {
  if (count == 0) return;
  const int piece = piece_size(count, std::max(1, threads), min_piece, per_thread);
  const int pieces = int((count + size_t(piece) - 1) / size_t(piece));
  parallel_for(
      pieces,
      [&](int i) {
        const size_t b = size_t(i) * size_t(piece);
        fn(b, std::min(count, b + size_t(piece)));
      },
      threads);
}

// acc[0, out) += x[0, rows) W[0, rows) for W rows `out` apart: four rows per pass over acc.
void gemv_rows_portable(const float* x, const float* w, int rows, int out, float* acc) {
  int i = 0;
  for (; i + 4 <= rows; i += 4) {
    const float a = x[i], b = x[i + 1], c = x[i + 2], d = x[i + 3];
    const float* w0 = w + size_t(i) * out;
    const float* w1 = w0 + out;
    const float* w2 = w1 + out;
    const float* w3 = w2 + out;
    for (int j = 0; j < out; ++j) acc[j] += a * w0[j] + b * w1[j] + c * w2[j] + d * w3[j];
  }
  for (; i < rows; ++i) {
    const float a = x[i];
    const float* w0 = w + size_t(i) * out;
    for (int j = 0; j < out; ++j) acc[j] += a * w0[j];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTN_GEMV_AVX512 1
// The same with AVX-512, eight rows per pass over acc: half the accumulator traffic, and the
// read of W (the decode step's bound) measured ~20% faster than the AVX2 loop above.
#pragma GCC diagnostic push
#if !defined(__clang__)                                 // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12, inside its AVX-512 headers
#endif
__attribute__((target("avx512f"))) void gemv_rows_avx512(const float* x, const float* w, int rows,
                                                         int out, float* acc) {
  const int full = out / 16 * 16;
  int i = 0;
  for (; i + 8 <= rows; i += 8) {
    const float* r = w + size_t(i) * out;
    __m512 xs[8];
    for (int k = 0; k < 8; ++k) xs[k] = _mm512_set1_ps(x[i + k]);
    for (int j = 0; j < full; j += 16) {
      __m512 s = _mm512_loadu_ps(acc + j);
      for (int k = 0; k < 8; ++k)
        s = _mm512_fmadd_ps(xs[k], _mm512_loadu_ps(r + size_t(k) * out + j), s);
      _mm512_storeu_ps(acc + j, s);
    }
    for (int j = full; j < out; ++j)
      for (int k = 0; k < 8; ++k) acc[j] += x[i + k] * r[size_t(k) * out + j];
  }
  gemv_rows_portable(x + i, w + size_t(i) * out, rows - i, out, acc);
}
#pragma GCC diagnostic pop
#endif

void gemv_rows(const float* x, const float* w, int rows, int out, float* acc) {
#ifdef ATTN_GEMV_AVX512
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return gemv_rows_avx512(x, w, rows, out, acc);
#endif
  gemv_rows_portable(x, w, rows, out, acc);
}

// y f32 [out] = x W + b for W [in, out] (row-major) and one row x: each thread streams a
// contiguous block of W's rows (the read the step is bound by) into its own partial sum; the
// partials are added at the end. 16-bit rows are widened eight at a time into a small buffer.
void gemv_in_out(const float* x, const Linear& l, float* y, int threads) {
  const int in = l.in, out = l.out;
  const int parts = std::max(1, std::min(threads, in / 64));
  std::vector<float> partial(size_t(parts) * out, 0.0f);
  const size_t es = cpu::elem_size(l.w.type);
  parallel_for(
      parts,
      [&](int t) {
        const int i0 = int(int64_t(in) * t / parts), i1 = int(int64_t(in) * (t + 1) / parts);
        float* acc = partial.data() + size_t(t) * out;
        if (l.w.type == cpu::ElemType::F32) {
          gemv_rows(x + i0, static_cast<const float*>(l.w.data) + size_t(i0) * out, i1 - i0, out,
                    acc);
          return;
        }
        std::vector<float> rows(size_t(8) * out);
        for (int i = i0; i < i1; i += 8) {
          const int r = std::min(8, i1 - i);
          cpu::widen(l.w.type, static_cast<const char*>(l.w.data) + size_t(i) * out * es,
                     size_t(r) * out, rows.data());
          gemv_rows(x + i, rows.data(), r, out, acc);
        }
      },
      threads);
  for (int j = 0; j < out; ++j) y[j] = l.b ? l.b[j] : 0.0f;
  for (int t = 0; t < parts; ++t)
    for (int j = 0; j < out; ++j) y[j] += partial[size_t(t) * out + j];
}

// 8 values of a 16-bit row from `p`, widened (AVX2 + F16C, the x86-64-v3 baseline).
inline __m256 widen8(const uint16_t* p, bool bf16) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
              : _mm256_cvtph_ps(h);
}

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Rows [j0, j1) of y f32 [R, out] = x f32 [R, in] W^T + b for a 16-bit W [out, in], J rows of
// W per pass: R * J independent accumulator chains keep the FMA latency off the critical path,
// so the loop runs at the speed W streams in.
template <int R, int J>
void gemv_nk_16_rows(const float* x, const Linear& l, float* y, size_t j0, size_t j1) {
  const bool bf16 = l.w.type == cpu::ElemType::Bf16;
  const int in = l.in, full = in / 8 * 8;
  const auto* base = static_cast<const uint16_t*>(l.w.data);
  std::vector<float> tail(size_t(in - full));
  size_t j = j0;
  for (; j + J <= j1; j += J) {
    __m256 acc[R][J];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < J; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int k = 0; k < full; k += 8) {
      __m256 wv[J];
      for (int c = 0; c < J; ++c) wv[c] = widen8(base + (j + size_t(c)) * size_t(in) + k, bf16);
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + size_t(r) * in + k);
        for (int c = 0; c < J; ++c) acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
      }
    }
    for (int c = 0; c < J; ++c) {
      if (full < in)
        cpu::widen(l.w.type, base + (j + size_t(c)) * size_t(in) + full, size_t(in - full),
                   tail.data());
      for (int r = 0; r < R; ++r) {
        float s = hsum(acc[r][c]);
        for (int k = full; k < in; ++k) s += x[size_t(r) * in + k] * tail[size_t(k - full)];
        y[size_t(r) * l.out + j + size_t(c)] = s + (l.b ? l.b[j + size_t(c)] : 0.0f);
      }
    }
  }
  if (j < j1) {
    if constexpr (J > 1) gemv_nk_16_rows<R, 1>(x, l, y, j, j1);
  }
}

#ifdef ATTN_GEMV_AVX512
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The one-row case (a decode step) with AVX-512: half the instructions per byte of W, so the
// loop keeps up with memory (measured ~20% faster than the AVX2 template on an 8B model).
__attribute__((target("avx512f"))) void gemv_nk_16_row_avx512(const float* x, const Linear& l,
                                                              float* y, size_t j0, size_t j1) {
  constexpr int J = 4;
  const bool bf16 = l.w.type == cpu::ElemType::Bf16;
  const int in = l.in, full = in / 16 * 16;
  const auto* base = static_cast<const uint16_t*>(l.w.data);
  std::vector<float> tail(size_t(in - full));
  for (size_t j = j0; j < j1; j += J) {
    const int cols = int(std::min<size_t>(J, j1 - j));
    __m512 acc[J] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    const uint16_t* w[J];
    for (int c = 0; c < J; ++c) w[c] = base + (j + size_t(std::min(c, cols - 1))) * size_t(in);
    for (int k = 0; k < full; k += 16) {
      const __m512 xv = _mm512_loadu_ps(x + k);
      // Past a row's last 2 KiB the line 2 KiB ahead is the next row's, read already by the
      // stream beside this one: the next J rows' starts instead, so they begin warm (a decode
      // step of the 8B checkpoint 16% faster: median step_min 659 against 784 ms, five pairs).
      const size_t skip = k + 1024 >= in ? size_t(J - 1) * size_t(in) : 0;
      for (int c = 0; c < J; ++c) {
        // Every other step (a 64-byte line), ask for the line 2 KiB ahead: the hardware's
        // streams restart at each 4 KiB page of the memory map.
        if ((k & 16) == 0)
          _mm_prefetch(reinterpret_cast<const char*>(w[c] + k + 1024 + skip), _MM_HINT_T0);
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[c] + k));
        const __m512 wv = bf16
                              ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                              : _mm512_cvtph_ps(h);
        acc[c] = _mm512_fmadd_ps(xv, wv, acc[c]);
      }
    }
    for (int c = 0; c < cols; ++c) {
      float s = _mm512_reduce_add_ps(acc[c]);
      if (full < in) {
        cpu::widen(l.w.type, w[c] + full, size_t(in - full), tail.data());
        for (int k = full; k < in; ++k) s += x[k] * tail[size_t(k - full)];
      }
      y[j + size_t(c)] = s + (l.b ? l.b[j + size_t(c)] : 0.0f);
    }
  }
}
#pragma GCC diagnostic pop
#endif

// y f32 [n, out] = x f32 [n, in] W^T + b for n < 8 rows and a 16-bit W [out, in]: a decode
// step, bound by reading W once. Threads split W's rows; each is widened in registers (exact)
// and dotted with every x row.
void gemv_nk_16(const float* x, int n, const Linear& l, float* y, int threads) {
#ifdef ATTN_GEMV_AVX512
  static const bool avx512 = __builtin_cpu_supports("avx512f");
#endif
  parallel_ranges(
      size_t(l.out), threads, 64,
      [&](size_t b, size_t e) {
        switch (n) {
          case 1:
#ifdef ATTN_GEMV_AVX512
            if (avx512) return gemv_nk_16_row_avx512(x, l, y, b, e);
#endif
            return gemv_nk_16_rows<1, 4>(x, l, y, b, e);
          case 2:
            return gemv_nk_16_rows<2, 4>(x, l, y, b, e);
          case 3:
            return gemv_nk_16_rows<3, 2>(x, l, y, b, e);
          case 4:
            return gemv_nk_16_rows<4, 2>(x, l, y, b, e);
          case 5:
            return gemv_nk_16_rows<5, 2>(x, l, y, b, e);
          case 6:
            return gemv_nk_16_rows<6, 1>(x, l, y, b, e);
          default:
            return gemv_nk_16_rows<7, 1>(x, l, y, b, e);
        }
      },
      // A decode step's ~225 products each end when their last piece does: 16 pieces a thread keep
      // that wait short where cores are shared (4: steps ~2-3% slower, paired against reads).
      16);
}

}  // namespace

Linear linear_rows(const Linear& l, int c0, int c1) {
  require(!l.in_out && c0 >= 0 && c0 <= c1 && c1 <= l.out, ErrorCode::InvalidArgument,
          "linear_rows: rows " + std::to_string(c0) + ".." + std::to_string(c1) +
              " of a layer with " + std::to_string(l.out) + " outputs");
  Linear r = l;
  r.w.data = static_cast<const char*>(l.w.data) + size_t(c0) * l.in * cpu::elem_size(l.w.type);
  r.b = l.b ? l.b + c0 : nullptr;
  r.out = c1 - c0;
  return r;
}

Linear load_linear(const WeightStore& ws, const std::string& name, int in, int out, bool bias,
                   bool conv1d) {
  Linear l;
  l.in = in;
  l.out = out;
  l.in_out = conv1d;
  const std::vector<int64_t> shape =
      conv1d ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
  l.w = ws.get_matrix(name + ".weight", shape, conv1d ? "Conv1D [in, out]" : "Linear [out, in]");
  l.b = bias ? ws.get(name + ".bias", {out}) : ws.get_optional(name + ".bias", {out});
  return l;
}

void matrix_row(const Matrix& m, size_t row, size_t cols, float* out) {
  cpu::widen(m.type, static_cast<const char*>(m.data) + row * cols * cpu::elem_size(m.type), cols,
             out);
}

namespace {
thread_local Matmul t_matmul = Matmul::F32;
}  // namespace

const char* matmul_name(Matmul m) {
  return m == Matmul::Bf16 ? "bf16" : "f32";
}
Matmul parse_matmul(const std::string& text) {
  if (text == "f32") return Matmul::F32;
  if (text == "bf16") return Matmul::Bf16;
  throw Error(ErrorCode::InvalidArgument,
              "unknown matmul precision '" + text + "'; precisions: f32, bf16");
}
Matmul current_matmul() {
  return t_matmul;
}
MatmulScope::MatmulScope(Matmul m) : saved_(t_matmul) {
  t_matmul = m;
}
MatmulScope::~MatmulScope() {
  t_matmul = saved_;
}

void product_bf16(const float* a, int lda, const float* b, int ldb, bool b_nk, float* c, int ldc,
                  int m, int n, int k) {
  cpu::GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.b_nk = b_nk;
  g.c = c;
  g.ldc = ldc;
  g.round_bf16 = true;
  cpu::sgemm(g, 1);  // rounded operands: always computed (never left to Eigen)
}

void linear(const float* x, int n, const Linear& l, float* y, int threads) {
  threads = thread_count(threads);
  const bool f32 = l.w.type == cpu::ElemType::F32;
  // A few rows (decode steps) are matrix-vector products bound by reading W: the packing GEMM
  // would copy W into panels first, so stream it once instead.
  // Fewer than 8 rows of 16-bit weights are always widened exactly (only the GEMM's bf16 paths,
  // amx and dpbf16, round x to bf16).
  if (n < 8 && !f32 && !l.in_out) return gemv_nk_16(x, n, l, y, threads);
  if ((n == 1 || (n < 8 && !f32)) && l.in_out) {
    for (int r = 0; r < n; ++r)
      gemv_in_out(x + size_t(r) * l.in, l, y + size_t(r) * l.out, threads);
    return;
  }
  cpu::GemmArgs g;
  g.m = n;
  g.n = l.out;
  g.k = l.in;
  g.a = x;
  g.lda = l.in;
  g.b = l.w.data;
  g.b_type = l.w.type;
  g.ldb = l.in_out ? l.out : l.in;
  g.b_nk = !l.in_out;
  g.bias = l.b;
  g.c = y;
  g.ldc = l.out;
  g.round_bf16 = t_matmul == Matmul::Bf16;
  g.b_weights = true;
  if ((n >= 8 || !f32) && cpu::sgemm(g, threads)) return;
  const auto* w = static_cast<const float*>(l.w.data);
  Eigen::Map<const RowMat> X(x, n, l.in);
  Eigen::Map<RowMat> Y(y, n, l.out);
  // Split output columns: each thread streams its own slice of W once.
  parallel_ranges(size_t(l.out), threads, 64, [&](size_t b, size_t e) {
    const Eigen::Index c0 = Eigen::Index(b), nc = Eigen::Index(e - b);
    if (l.in_out) {
      Eigen::Map<const RowMat> W(w, l.in, l.out);
      Y.middleCols(c0, nc).noalias() = X * W.middleCols(c0, nc);
    } else {
      Eigen::Map<const RowMat> W(w, l.out, l.in);
      Y.middleCols(c0, nc).noalias() = X * W.middleRows(c0, nc).transpose();
    }
    if (l.b) Y.middleCols(c0, nc).rowwise() += Eigen::Map<const RowVec>(l.b + c0, nc);
  });
}

void layer_norm(const float* x, int n, int c, const float* gamma, const float* beta, float eps,
                float* y, int threads) {
  parallel_ranges(size_t(n), thread_count(threads), 16, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      Eigen::Map<const Eigen::ArrayXf> xr(x + t * size_t(c), c);
      Eigen::Map<Eigen::ArrayXf> yr(y + t * size_t(c), c);
      const double mean = xr.cast<double>().mean();
      const double var = (xr.cast<double>() - mean).square().mean();
      const float inv = float(1.0 / std::sqrt(var + double(eps)));
      yr = (xr - float(mean)) * inv * Eigen::Map<const Eigen::ArrayXf>(gamma, c);
      if (beta) yr += Eigen::Map<const Eigen::ArrayXf>(beta, c);
    }
  });
}

void rms_norm(const float* x, int n, int c, const float* gamma, float eps, float* y, int threads) {
  parallel_ranges(size_t(n), thread_count(threads), 16, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      Eigen::Map<const Eigen::ArrayXf> xr(x + t * size_t(c), c);
      Eigen::Map<Eigen::ArrayXf> yr(y + t * size_t(c), c);
      const double ms = xr.cast<double>().square().mean();
      const float inv = float(1.0 / std::sqrt(ms + double(eps)));
      yr = xr * inv * Eigen::Map<const Eigen::ArrayXf>(gamma, c);
    }
  });
}

Activation activation_from_name(const std::string& name, const std::string& source) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") {
    return Activation::GeluTanh;
  }
  if (name == "gelu") return Activation::GeluErf;
  if (name == "silu" || name == "swish") return Activation::Silu;
  if (name == "relu") return Activation::Relu;
  throw Error(ErrorCode::Unsupported, source + ": activation '" + name +
                                          "' is not supported (gelu, gelu_new, "
                                          "gelu_pytorch_tanh, silu, relu)");
}

namespace {

// y[0, count) = act(x[0, count)); y may be x.
void activate_range(Activation act, const float* x, float* y, size_t count) {
  const Eigen::Map<const Eigen::ArrayXf> a(x, Eigen::Index(count));
  ArrMap out(y, Eigen::Index(count));
  switch (act) {
    case Activation::GeluTanh: {
      const float k = 0.7978845608028654f;  // sqrt(2 / pi)
      out = 0.5f * a * (1.0f + (k * (a + 0.044715f * a.cube())).tanh());
      break;
    }
    case Activation::GeluErf:
      out = 0.5f * a * (1.0f + (a * 0.7071067811865476f).erf());
      break;
    case Activation::Silu:
      out = a / (1.0f + (-a).exp());
      break;
    case Activation::Relu:
      out = a.max(0.0f);
      break;
  }
}

}  // namespace

void activate(Activation act, float* x, size_t count, int threads) {
  parallel_ranges(count, thread_count(threads), 4096,
                  [&](size_t b, size_t e) { activate_range(act, x + b, x + b, e - b); });
}

void activate(Activation act, const float* x, float* y, size_t count, int threads) {
  parallel_ranges(count, thread_count(threads), 4096,
                  [&](size_t b, size_t e) { activate_range(act, x + b, y + b, e - b); });
}

void gated_activate(Activation act, float* gate, const float* up, size_t count, int threads) {
  parallel_ranges(count, thread_count(threads), 4096, [&](size_t b, size_t e) {
    activate_range(act, gate + b, gate + b, e - b);
    ArrMap(gate + b, Eigen::Index(e - b)) *=
        Eigen::Map<const Eigen::ArrayXf>(up + b, Eigen::Index(e - b));
  });
}

void add_inplace(float* x, const float* y, size_t count) {
  ArrMap(x, Eigen::Index(count)) += Eigen::Map<const Eigen::ArrayXf>(y, Eigen::Index(count));
}

}  // namespace attn::models
