// Quantised query-key products: Q and K are rounded to a low-precision format before the scores
// are computed; V, the softmax and the P V product stay f32. Simulated by a round trip (each
// value replaced by what its code decodes to), then the variant's exact parts (pattern,
// modifiers, normaliser) run through the backend's own kernels on that problem, so the scores
// are exactly those an integer / FP8 QK kernel would see.
//   quant_qk(bits, smooth, block)  symmetric per-block integers: each run of `block` tokens of a
//       head shares one scale max|x| / (2^(bits-1) - 1), codes round(x / scale); with smooth,
//       the mean key of the head is removed before rounding and added back (SageAttention's key
//       smoothing: softmax ignores the q.mean shift, and the spread left is much smaller).
//       (Zhang et al. 2025, SageAttention: Accurate 8-Bit Attention for Plug-and-play Inference
//       Acceleration)
//   fp8_qk(format)  OCP FP8 e4m3 or e5m2 with one scale per head mapping max|x| to the format's
//       largest finite value, round to nearest even (as in FP8 attention kernels, e.g.
//       FlashAttention-3's FP8 path).
// Result::approx keeps the quantised problem: the implied matrix is the exact probabilities of
// that problem.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/kv/kv_precision.h"
#include "compute/variants/patterns.h"

namespace attn {

namespace {

// Symmetric integer round trip of rows [0, n) of one head (f32 [n, d]) in blocks of `block` rows.
void quantise_int(float* x, int n, int d, int block, int bits, bool smooth) {
  std::vector<double> mean(size_t(d), 0.0);
  if (smooth) {
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < d; ++c) mean[size_t(c)] += x[size_t(i) * d + c];
    for (double& m : mean) m /= n;
  }
  const float top = float((1 << (bits - 1)) - 1);
  for (int b0 = 0; b0 < n; b0 += block) {
    const int b1 = std::min(b0 + block, n);
    float amax = 0;
    for (int i = b0; i < b1; ++i)
      for (int c = 0; c < d; ++c)
        amax = std::max(amax, std::abs(x[size_t(i) * d + c] - float(mean[size_t(c)])));
    if (amax == 0) continue;
    const float scale = amax / top;
    for (int i = b0; i < b1; ++i)
      for (int c = 0; c < d; ++c) {
        float& v = x[size_t(i) * d + c];
        const float m = float(mean[size_t(c)]);
        v = std::clamp(std::nearbyint((v - m) / scale), -top, top) * scale + m;
      }
  }
}

// FP8 round trip of one head (f32 [n, d]) with one scale mapping max|x| to the largest finite.
void quantise_fp8(float* x, size_t count, bool e4m3) {
  float amax = 0;
  for (size_t i = 0; i < count; ++i) amax = std::max(amax, std::abs(x[i]));
  if (amax == 0) return;
  const float scale = amax / (e4m3 ? 448.0f : 57344.0f);
  for (size_t i = 0; i < count; ++i) x[i] = round_fp8(x[i] / scale, e4m3) * scale;
}

class QuantQk final : public Approximation {
 public:
  // fp8: bits unused; e4m3 chooses the format. Integer: bits, smooth, block.
  QuantQk(bool fp8, bool e4m3, int bits, bool smooth, int block)
      : fp8_(fp8), e4m3_(e4m3), bits_(bits), smooth_(smooth), block_(block) {}

  VariantInfo info() const override { return fp8_ ? kFp8QkApprox.info() : kQuantQkApprox.info(); }
  Kind kind() const override { return Kind::Wrap; }

  Result run(const Variant& v, const Problem& p, Backend& backend, ApproxPath path,
             const RunOptions& opt) const override {
    (void)path;  // the reference backend runs the exact parts in f64 on the same rounded inputs
    const auto t0 = std::chrono::steady_clock::now();
    auto q = std::make_shared<Problem>(p);
    for (int h = 0; h < q->n_heads; ++h)
      round_rows(q->q.data() + size_t(h) * q->n_q * q->d, q->n_q, q->d, false);
    for (int h = 0; h < q->n_kv_heads; ++h)
      round_rows(q->k.data() + size_t(h) * q->n_k * q->d, q->n_k, q->d, true);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Result r = run_changed(v, std::move(q), backend, opt);
    r.stats.counted.flops += round_flops(p);
    r.stats.counted.bytes += round_bytes(p);
    r.stats.select_seconds += seconds;
    return r;
  }

  void implied_block(const Variant& v, const Problem& p, const Result& r, int h, int i0, int i1,
                     int k0, int k1, std::vector<double>& out) const override {
    (void)p;
    implied_changed(v, r, h, i0, i1, k0, k1, out);
  }

  Cost predict(const Variant& v, const Problem& p, double density) const override {
    const bool dynamic = v.pattern() && v.pattern()->dynamic();
    Cost c = v.exact_part().predict(p, dynamic ? density : -1);
    c.flops += round_flops(p);
    c.bytes += round_bytes(p);
    return c;
  }

 private:
  void round_rows(float* x, int n, int d, bool key) const {
    if (fp8_)
      quantise_fp8(x, size_t(n) * d, e4m3_);
    else
      quantise_int(x, n, d, block_, bits_, smooth_ && key);
  }
  // About four operations per element (scale search, divide, round, multiply back; the mean).
  static double round_flops(const Problem& p) {
    return 4.0 * p.d * (double(p.n_heads) * p.n_q + double(p.n_kv_heads) * p.n_k);
  }
  // Read and written once each at f32.
  static double round_bytes(const Problem& p) {
    return 8.0 * p.d * (double(p.n_heads) * p.n_q + double(p.n_kv_heads) * p.n_k);
  }

  bool fp8_, e4m3_;
  int bits_;
  bool smooth_;
  int block_;
};

VariantInfo quant_qk_info() {
  return {"quant_qk",
          "Integer QK (SageAttention-style)",
          "quantised",
          "Zhang et al. 2025, SageAttention: Accurate 8-Bit Attention for Plug-and-play "
          "Inference Acceleration",
          "Q and K rounded to symmetric per-block integers (keys mean-smoothed) before the scores; "
          "the rest exact.",
          {int_param("bits", 2, 8, 8, "integer bits (8: INT8, 4: INT4)"),
           bool_param("smooth", true, "remove the mean key before rounding (added back after)"),
           int_param("block", 1, 1000000, 64, "tokens per quantisation block")}};
}

VariantInfo fp8_qk_info() {
  return {"fp8_qk",
          "FP8 QK",
          "quantised",
          "Micikevicius et al. 2022, FP8 Formats for Deep Learning; Shah et al. 2024, "
          "FlashAttention-3",
          "Q and K rounded to FP8 (one scale per head) before the scores; the rest exact.",
          {enum_param("format", {"e4m3", "e5m2"}, 0, "FP8 format")}};
}

std::shared_ptr<const Approximation> make_quant_qk(const Params& params) {
  return std::make_shared<QuantQk>(false, false, int(params.at("bits")), params.at("smooth") != 0,
                                   int(params.at("block")));
}
std::shared_ptr<const Approximation> make_fp8_qk(const Params& params) {
  return std::make_shared<QuantQk>(true, params.at("format") == 0, 0, false, 0);
}

}  // namespace

const ApproximationFactory kQuantQkApprox = {quant_qk_info, make_quant_qk};
const ApproximationFactory kFp8QkApprox = {fp8_qk_info, make_fp8_qk};

}  // namespace attn
