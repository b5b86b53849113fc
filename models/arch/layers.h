// The building blocks of the forward passes (one function per layer, llm.c style), f32 on the
// CPU with Eigen. Activations are row-major [tokens, features]. Threads split independent work
// (output columns of a GEMM, rows of a norm); each piece runs a single-threaded Eigen kernel.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "compute/cpu/gemm.h"

namespace attn::models {

class WeightStore;

// A weight matrix as the checkpoint stores it (f32, bf16 or f16), in place in the memory map:
// the GEMMs read 16-bit weights directly, so a BF16 model costs its file size, not twice it.
struct Matrix {
  const void* data = nullptr;
  cpu::ElemType type = cpu::ElemType::F32;
  explicit operator bool() const { return data != nullptr; }
};
// out[0, cols) = row `row` of m (`cols` wide, rows contiguous), widened to f32.
void matrix_row(const Matrix& m, size_t row, size_t cols, float* out);

// A dense layer as stored in the checkpoint: nn.Linear keeps W as [out, in], GPT-2's Conv1D as
// [in, out]. Both compute y = x W^T (resp. x W) + b without copying W.
struct Linear {
  Matrix w;                  // [out, in] (nn.Linear) or [in, out] (Conv1D), as stored
  const float* b = nullptr;  // f32 [out], or null
  int in = 0, out = 0;
  bool in_out = false;  // Conv1D layout
};

// Output columns [c0, c1) of a layer stored as [out, in] (not Conv1D): the rows c0..c1 of its W
// and bias, as a layer of their own (a causal LM's head in vocabulary blocks).
Linear linear_rows(const Linear& l, int c0, int c1);

// Looks up `{name}.weight` (and `{name}.bias`: required when `bias` is true, else optional)
// with the shape [out, in] (or [in, out] for Conv1D).
Linear load_linear(const WeightStore& ws, const std::string& name, int in, int out, bool bias,
                   bool conv1d = false);

// How linear() multiplies on this thread: F32 as the weights are stored, or Bf16 (x and f32 or
// bf16 weights rounded to bf16, products summed in f32: cpu::GemmArgs::round_bf16, AMX tile
// products or vdpbf16ps where the CPU has them), as torch.set_float32_matmul_precision("medium")
// does. A pass sets it for its own thread with MatmulScope (ForwardOptions::matmul,
// ReverseOptions::matmul); GEMMs of 8 or more rows follow it, matrix-vector products (decode
// steps, one row of logits) are always exact.
enum class Matmul : uint8_t { F32, Bf16 };
const char* matmul_name(Matmul m);  // "f32", "bf16"
// "f32" | "bf16"; throws Error(InvalidArgument) naming both.
Matmul parse_matmul(const std::string& text);
Matmul current_matmul();
class MatmulScope {
 public:
  explicit MatmulScope(Matmul m);
  ~MatmulScope();
  MatmulScope(const MatmulScope&) = delete;
  MatmulScope& operator=(const MatmulScope&) = delete;

 private:
  Matmul saved_;
};

// c f32 [m, n] (row stride ldc) = a f32 [m, k] (row stride lda) times b, b f32 [k, n] or, if
// b_nk, [n, k] (row stride ldb), with both operands rounded to bf16 and the products summed in
// f32 (Matmul::Bf16's arithmetic), on the calling thread alone: attention's own products when a
// pass runs its matmuls in bf16 (one call per head inside a parallel task).
void product_bf16(const float* a, int lda, const float* b, int ldb, bool b_nk, float* c, int ldc,
                  int m, int n, int k);

// y f32 [n, out] = x f32 [n, in] W (+ b), in current_matmul()'s precision.
void linear(const float* x, int n, const Linear& l, float* y, int threads);

// y f32 [n, c] = LayerNorm(x f32 [n, c]) * gamma + beta (beta may be null). y may alias x.
void layer_norm(const float* x, int n, int c, const float* gamma, const float* beta, float eps,
                float* y, int threads);
// y f32 [n, c] = x / sqrt(mean(x^2) + eps) * gamma. y may alias x.
void rms_norm(const float* x, int n, int c, const float* gamma, float eps, float* y, int threads);

enum class Activation { GeluTanh, GeluErf, Silu, Relu };
// Maps config.json's hidden_act / activation_function; throws Error(Unsupported) naming it.
Activation activation_from_name(const std::string& name, const std::string& source);
// x f32 [count] = act(x), in place.
void activate(Activation act, float* x, size_t count, int threads);
// y f32 [count] = act(x) (a traced pass keeps x).
void activate(Activation act, const float* x, float* y, size_t count, int threads);
// gate f32 [count] = act(gate) * up (SwiGLU when act is Silu).
void gated_activate(Activation act, float* gate, const float* up, size_t count, int threads);

// x f32 [count] += y f32 [count].
void add_inplace(float* x, const float* y, size_t count);

}  // namespace attn::models
