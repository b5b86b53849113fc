#include "compute/cpu/gemm.h"

#include <immintrin.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "compute/cpu/gemm_split.h"
#include "compute/parallel.h"

namespace attn::cpu {

// Defined in gemm_avx512.cpp, gemm_amx.cpp and gemm_dpbf16.cpp.
bool gemm_avx512_built();
void gemm_avx512_run(const GemmArgs& g, int threads);
bool gemm_amx_usable();
void gemm_amx_run(const GemmArgs& g, int threads);
bool gemm_dpbf16_usable();
void gemm_dpbf16_run(const GemmArgs& g, int threads);

namespace {

bool avx512_cpu() {
  if (!gemm_avx512_built()) return false;
#if defined(__GNUC__) && defined(__x86_64__)
  // libgcc's check includes the OS enabling the AVX-512 register state (XGETBV).
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

enum class Path { Amx, Dpbf16, Avx512, Eigen };

// Read per call, so a test can force each path in one process. bf16 products (bf16 B, or f32 B
// with round_bf16) take AMX, else vdpbf16ps, else the widening avx512 path; forcing "dpbf16"
// skips AMX, forcing "avx512" skips both.
Path path_for(ElemType t) {
  static const bool avx512 = avx512_cpu();
  const char* env = std::getenv("ATTNSCOPE_GEMM");
  const std::string want = env ? env : "";
  if (want == "eigen") return Path::Eigen;
  if (t == ElemType::Bf16 && want != "avx512") {
    if (want != "dpbf16" && gemm_amx_usable()) return Path::Amx;
    if (gemm_dpbf16_usable()) return Path::Dpbf16;
  }
  return avx512 ? Path::Avx512 : Path::Eigen;
}

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// 16-bit B on the portable path: each task widens a block of B's columns to f32 (bounded
// scratch, never the whole matrix) and multiplies it with Eigen.
void gemm_widened(const GemmArgs& g, int threads) {
  constexpr int kCols = 128;
  const int blocks = (g.n + kCols - 1) / kCols;
  const size_t es = elem_size(g.b_type);
  const auto* b = static_cast<const unsigned char*>(g.b);
  Eigen::Map<const RowMat, 0, Eigen::OuterStride<>> A(g.a, g.m, g.k, Eigen::OuterStride<>(g.lda));
  parallel_for(
      blocks,
      [&](int blk) {
        const int c0 = blk * kCols, nc = std::min(kCols, g.n - c0);
        thread_local std::vector<float> w;
        w.resize(size_t(nc) * g.k);
        if (g.b_nk) {  // rows c0.. of [n, k]: W block [nc, k]
          for (int j = 0; j < nc; ++j)
            widen(g.b_type, b + (size_t(c0 + j) * g.ldb) * es, size_t(g.k),
                  w.data() + size_t(j) * g.k);
        } else {  // columns c0.. of [k, n]: W block [k, nc]
          for (int p = 0; p < g.k; ++p)
            widen(g.b_type, b + (size_t(p) * g.ldb + c0) * es, size_t(nc),
                  w.data() + size_t(p) * nc);
        }
        Eigen::Map<RowMat, 0, Eigen::OuterStride<>> C(g.c + c0, g.m, nc,
                                                      Eigen::OuterStride<>(g.ldc));
        if (g.b_nk) {
          C.noalias() = A * Eigen::Map<const RowMat>(w.data(), nc, g.k).transpose();
        } else {
          C.noalias() = A * Eigen::Map<const RowMat>(w.data(), g.k, nc);
        }
        if (g.bias) C.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(g.bias + c0, nc);
      },
      thread_count(threads));
}

}  // namespace

const char* elem_type_name(ElemType t) {
  return t == ElemType::Bf16 ? "bf16" : t == ElemType::F16 ? "f16" : "f32";
}

size_t elem_size(ElemType t) {
  return t == ElemType::F32 ? 4 : 2;
}

const char* gemm_path(ElemType t, bool round_bf16) {
  switch (path_for(round_bf16 && t == ElemType::F32 ? ElemType::Bf16 : t)) {
    case Path::Amx:
      return "amx";
    case Path::Dpbf16:
      return "dpbf16";
    case Path::Avx512:
      return "avx512";
    default:
      return "eigen";
  }
}

const char* sgemm_isa() {
  return path_for(ElemType::F32) == Path::Avx512 ? "avx512" : "";
}

uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(u >> 16 | 0x40);  // quiet NaN
  u += 0x7fffu + (u >> 16 & 1);
  return uint16_t(u >> 16);
}

void widen(ElemType t, const void* src, size_t n, float* dst) {
  if (t == ElemType::F32) {
    std::memcpy(dst, src, n * 4);
    return;
  }
  const auto* s = static_cast<const uint16_t*>(src);
  size_t i = 0;
  // x86-64-v3 is the baseline: AVX2 and F16C.
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m256 f = t == ElemType::Bf16
                         ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                         : _mm256_cvtph_ps(h);
    _mm256_storeu_ps(dst + i, f);
  }
  for (; i < n; ++i) {
    if (t == ElemType::Bf16) {
      const uint32_t u = uint32_t(s[i]) << 16;
      std::memcpy(dst + i, &u, 4);
    } else {
      dst[i] = _cvtsh_ss(s[i]);
    }
  }
}

namespace {

// round_bf16 off the bf16 paths (amx, dpbf16): A rounded and f32 B converted to bf16 (whose
// widening is exact), so every path multiplies the same bf16 values.
void sgemm_rounded(const GemmArgs& g, int threads) {
  std::vector<float> a(size_t(g.m) * g.k);
  for (int i = 0; i < g.m; ++i)
    for (int p = 0; p < g.k; ++p) {
      const uint32_t u = uint32_t(bf16_bits(g.a[size_t(i) * g.lda + p])) << 16;
      std::memcpy(&a[size_t(i) * g.k + p], &u, 4);
    }
  GemmArgs r = g;
  r.a = a.data();
  r.lda = g.k;
  r.round_bf16 = false;
  std::vector<uint16_t> b;
  if (g.b_type == ElemType::F32) {
    const int rows = g.b_nk ? g.n : g.k, cols = g.b_nk ? g.k : g.n;
    b.resize(size_t(rows) * cols);
    const auto* src = static_cast<const float*>(g.b);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j)
        b[size_t(i) * cols + j] = bf16_bits(src[size_t(i) * g.ldb + j]);
    r.b = b.data();
    r.b_type = ElemType::Bf16;
    r.ldb = cols;
  }
  sgemm(r, threads);
}

}  // namespace

bool sgemm(const GemmArgs& g, int threads) {
  // f16 B is always widened exactly; round_bf16 covers f32 and bf16 B.
  const bool rounded = g.round_bf16 && g.b_type != ElemType::F16;
  const Path path = path_for(rounded ? ElemType::Bf16 : g.b_type);
  // The bf16 paths round A, and f32 B, while packing.
  if (rounded && g.m > 0 && g.n > 0 && g.k > 0 && path != Path::Amx && path != Path::Dpbf16) {
    sgemm_rounded(g, threads);
    return true;
  }
  if (path == Path::Eigen && g.b_type == ElemType::F32) return false;
  if (g.m <= 0 || g.n <= 0) return true;
  if (g.k <= 0) {  // empty sum: C = bias (or 0)
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) g.c[size_t(i) * g.ldc + j] = g.bias ? g.bias[j] : 0.0f;
    return true;
  }
  switch (path) {
    case Path::Amx:
      gemm_amx_run(g, threads);
      break;
    case Path::Dpbf16:
      gemm_dpbf16_run(g, threads);
      break;
    case Path::Avx512:
      gemm_avx512_run(g, threads);
      break;
    default:
      gemm_widened(g, threads);
  }
  return true;
}

void gemm_split(const GemmArgs& g, int threads, int mr, int nr,
                const std::function<void(int, int, int, int)>& block) {
  threads = thread_count(threads);
  const int col_tasks = std::max(1, std::min(threads, g.n / (2 * nr)));
  const int row_tasks = col_tasks >= threads ? 1 : std::max(1, std::min(threads, g.m / mr));
  const int cols_step = ((g.n + col_tasks - 1) / col_tasks + nr - 1) / nr * nr;
  const int rows_step = ((g.m + row_tasks - 1) / row_tasks + mr - 1) / mr * mr;
  parallel_for(
      col_tasks * row_tasks,
      [&](int t) {
        const int n0 = (t % col_tasks) * cols_step, n1 = std::min(g.n, n0 + cols_step);
        const int m0 = (t / col_tasks) * rows_step, m1 = std::min(g.m, m0 + rows_step);
        if (n0 < n1 && m0 < m1) block(m0, m1, n0, n1);
      },
      threads);
}

}  // namespace attn::cpu
