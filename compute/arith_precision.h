// Attention arithmetic in reduced precision, as a measurement: scores and softmax in bf16 or
// fp16 (or f32), with f32 accumulation or with every partial sum rounded too, computed both
// materialised (scores, then probabilities, then P V) and tiled (flash-style online softmax over
// key tiles, the running max, sum and output rescaled and stored in the format after every
// tile), each compared with an fp64 reference on the same inputs. Golden et al. (2024, "Is Flash
// Attention Stable?") report that in BF16 the tiled form deviates about 10x more from fp64 than
// the materialised one; this is where attnscope measures it.
#pragma once
#include <string>
#include <vector>

#include "compute/problem.h"

namespace attn {

enum class ArithFormat { F32, Bf16, Fp16 };
const char* arith_format_name(ArithFormat f);  // "f32", "bf16", "fp16"

struct ArithOptions {
  ArithFormat format = ArithFormat::Bf16;
  bool f32_accumulate = true;  // dot products and sums in f32, rounded when stored
  bool tiled = false;          // online softmax over key tiles of `tile`
  int tile = 64;
  // Storage alone in the format, as the real kernels run (RunOptions::precision): Q, K and V
  // rounded, every later step in f32; tiled, the unnormalised probabilities are also rounded
  // before the P V product (FlashAttention's and the AMX kernel's second product take them in
  // 16 bits; the running sum adds them unrounded). `f32_accumulate` is then moot.
  bool storage_only = false;
};

// Output f32 [H, N_q, d] of causal/bidirectional softmax attention of `p` in the given
// arithmetic (scale p.effective_scale(); masks by p.visible()).
std::vector<float> attention_in_precision(const Problem& p, const ArithOptions& o);
// The fp64 reference, f64 [H, N_q, d].
std::vector<double> attention_fp64(const Problem& p);

struct ArithError {
  double max_abs = 0;   // largest |out - ref|
  double mean_abs = 0;  // mean |out - ref|
};
ArithError arith_error(const std::vector<float>& out, const std::vector<double>& ref);

}  // namespace attn
