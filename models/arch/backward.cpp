#include "models/arch/backward.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <unsupported/Eigen/SpecialFunctions>

#include "compute/error.h"
#include "compute/parallel.h"

namespace attn::models {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

using Arr = Eigen::ArrayXf;
using ArrMap = Eigen::Map<Arr>;
using ConstArrMap = Eigen::Map<const Arr>;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kGeluCubic = 0.044715f;

// For x = pre[0, n): gate = act(x) / x (the identity rule's factor; every activation here is x
// times a gate, so it is defined at 0 too) and, when `deriv` is set, deriv = d act(x)/dx. In f32
// with Eigen's vectorised tanh, erf and exp, the forward pass's own arithmetic (a scalar double
// libm call per element cost a quarter of a reverse pass).
void act_factors(Activation act, const float* pre, size_t n, Arr& gate, Arr* deriv) {
  const ConstArrMap x(pre, Eigen::Index(n));
  switch (act) {
    case Activation::GeluTanh: {
      const Arr t = (kSqrt2OverPi * (x + kGeluCubic * x.cube())).tanh();
      gate = 0.5f * (1.0f + t);
      if (deriv)
        *deriv = gate + 0.5f * x * (1.0f - t.square()) * kSqrt2OverPi *
                            (1.0f + 3.0f * kGeluCubic * x.square());
      break;
    }
    case Activation::GeluErf:
      gate = 0.5f * (1.0f + (x * kInvSqrt2).erf());
      if (deriv) *deriv = gate + x * kInvSqrt2Pi * (-0.5f * x.square()).exp();
      break;
    case Activation::Silu:
      gate = 1.0f / (1.0f + (-x).exp());
      if (deriv) *deriv = gate * (1.0f + x * (1.0f - gate));
      break;
    case Activation::Relu:
      gate = (x > 0.0f).cast<float>();
      if (deriv) *deriv = gate;
      break;
  }
}

template <typename Fn>
void rows_parallel(int n, int threads, Fn fn) {
  parallel_for(n, fn, std::min(thread_count(threads), std::max(1, n / 8)));
}

// fn(b, e) over pieces of [0, count) of at least 4096 elements, up to 4 per thread.
template <typename Fn>
void ranges_parallel(size_t count, int threads, Fn fn) {
  const int pieces =
      int(std::min<size_t>(size_t(thread_count(threads)) * 4, (count + 4095) / 4096));
  if (pieces <= 1) {
    fn(size_t(0), count);
    return;
  }
  parallel_for(
      pieces,
      [&](int k) {
        fn(count * size_t(k) / size_t(pieces), count * size_t(k + 1) / size_t(pieces));
      },
      threads);
}

}  // namespace

const char* rule_name(Rule r) {
  return r == Rule::Lrp ? "lrp" : "gradient";
}

void linear_backward(const float* dy, int n, const Linear& l, float* dx, bool accumulate,
                     int threads) {
  // dx = dy W^T in the layer's own terms: the same weights read as the transposed layer.
  Linear t;
  t.w = l.w;
  t.in = l.out;
  t.out = l.in;
  t.in_out = !l.in_out;
  if (!accumulate) {
    linear(dy, n, t, dx, threads);
    return;
  }
  std::vector<float> tmp(size_t(n) * l.in);
  linear(dy, n, t, tmp.data(), threads);
  add_inplace(dx, tmp.data(), tmp.size());
}

// Both norms' backward passes sum in double, as vectors (Eigen), one row per task.
void layer_norm_backward(const float* x, int n, int c, const float* gamma, float eps,
                         const float* dy, float* dx, Rule rule, bool accumulate, int threads) {
  const Eigen::ArrayXd gd = ConstArrMap(gamma, c).cast<double>();
  rows_parallel(n, threads, [&](int t) {
    const Eigen::ArrayXd xc = [&] {
      const Eigen::ArrayXd xd = ConstArrMap(x + size_t(t) * c, c).cast<double>();
      return Eigen::ArrayXd(xd - xd.mean());
    }();
    const double r = 1 / std::sqrt(xc.square().mean() + eps);
    const Eigen::ArrayXd gy = ConstArrMap(dy + size_t(t) * c, c).cast<double>() * gd;
    const double mg = gy.mean();  // mean(gy); mean(gy * xhat) below
    // LRP holds 1/std constant: only the mean's subtraction remains.
    const double mgx = rule == Rule::Lrp ? 0.0 : (gy * xc).mean() * r;
    const Eigen::ArrayXf v = (r * (gy - mg - xc * (r * mgx))).cast<float>();
    ArrMap out(dx + size_t(t) * c, c);
    if (accumulate)
      out += v;
    else
      out = v;
  });
}

void rms_norm_backward(const float* x, int n, int c, const float* gamma, float eps, const float* dy,
                       float* dx, Rule rule, bool accumulate, int threads) {
  const Eigen::ArrayXd gd = ConstArrMap(gamma, c).cast<double>();
  rows_parallel(n, threads, [&](int t) {
    const Eigen::ArrayXd xd = ConstArrMap(x + size_t(t) * c, c).cast<double>();
    const double r = 1 / std::sqrt(xd.square().mean() + eps);
    const Eigen::ArrayXd gy = ConstArrMap(dy + size_t(t) * c, c).cast<double>() * gd;
    const double mgx = rule == Rule::Lrp ? 0.0 : (gy * xd).mean();  // mean(gy * x)
    const Eigen::ArrayXf v = (r * (gy - xd * (r * r * mgx))).cast<float>();
    ArrMap out(dx + size_t(t) * c, c);
    if (accumulate)
      out += v;
    else
      out = v;
  });
}

void activate_backward(Activation act, const float* pre, float* g, size_t count, Rule rule,
                       int threads) {
  ranges_parallel(count, threads, [&](size_t b, size_t e) {
    Arr gate, deriv;
    act_factors(act, pre + b, e - b, gate, rule == Rule::Lrp ? nullptr : &deriv);
    ArrMap(g + b, Eigen::Index(e - b)) *= rule == Rule::Lrp ? gate : deriv;
  });
}

void gated_backward(Activation act, const float* gate, const float* up, const float* dy,
                    float* dgate, float* dup, size_t count, Rule rule, int threads) {
  // y = a * up with a = act(gate); the uniform rule halves both factors' share under LRP.
  const float half = rule == Rule::Lrp ? 0.5f : 1.0f;
  ranges_parallel(count, threads, [&](size_t b, size_t e) {
    const auto n = Eigen::Index(e - b);
    Arr r, deriv;
    act_factors(act, gate + b, e - b, r, rule == Rule::Lrp ? nullptr : &deriv);
    const Arr g = ConstArrMap(dy + b, n);  // dy may alias dgate or dup
    const Arr u = ConstArrMap(up + b, n);
    const Arr a = ConstArrMap(gate + b, n) * r;
    ArrMap(dgate + b, n) = half * g * u * (rule == Rule::Lrp ? r : deriv);
    ArrMap(dup + b, n) = half * g * a;
  });
}

void attention_backward(const Problem& p, const float* pattern, const float* d_out, float* dq,
                        float* dk, float* dv, float* d_pattern, Rule rule, int threads) {
  const int H = p.n_heads, Hkv = p.n_kv_heads, n = p.n_q, nk = p.n_k, d = p.d;
  require(n == nk, ErrorCode::InvalidArgument,
          "attention_backward: the reverse pass runs over a whole sequence (n_q == n_k)");
  const int group = H / Hkv, hd = H * d;
  const float scale = p.effective_scale();
  const float half = rule == Rule::Lrp ? 0.5f : 1.0f;
  // Read here: the tasks run on pool threads, which do not share the caller's MatmulScope.
  const bool bf16 = current_matmul() == Matmul::Bf16;
  // One task per key/value head: its query heads add into the same dk, dv rows.
  parallel_for(
      Hkv,
      [&](int g) {
        Eigen::Map<const RowMat> K(p.k.data() + size_t(g) * nk * d, nk, d);
        Eigen::Map<const RowMat> V(p.v.data() + size_t(g) * nk * d, nk, d);
        Eigen::Map<RowMat> dK(dk + size_t(g) * nk * d, nk, d);
        Eigen::Map<RowMat> dV(dv + size_t(g) * nk * d, nk, d);
        dK.setZero();
        dV.setZero();
        RowMat dP(n, nk), T, part;  // T: a transposed [d, n] operand; part: a product to add
        for (int h = g * group; h < (g + 1) * group; ++h) {
          Eigen::Map<const RowMat> P(pattern + size_t(h) * n * nk, n, nk);
          Eigen::Map<const RowMat> Q(p.q.data() + size_t(h) * n * d, n, d);
          Strided dO(d_out + size_t(h) * d, n, d, Eigen::OuterStride<>(hd));
          if (bf16) {
            product_bf16(dO.data(), hd, V.data(), d, true, dP.data(), nk, n, nk, d);
          } else {
            dP.noalias() = dO * V.transpose();
          }
          if (d_pattern) Eigen::Map<RowMat>(d_pattern + size_t(h) * n * nk, n, nk) = dP;
          if (bf16) {  // dV^T = dO^T P: the d-row operand is the one transposed
            T = dO.transpose();
            part.resize(d, nk);
            product_bf16(T.data(), n, P.data(), nk, false, part.data(), nk, d, nk, n);
            dV += half * part.transpose();
          } else {
            dV.noalias() += half * (P.transpose() * dO);
          }
          // Softmax: dS = P * (half dP - rowsum(P * half dP)); the QK^T product halves again.
          // A causal row has no probability past its own position: only its first i + 1 count.
          for (int i = 0; i < n; ++i) {
            const int lim = p.causal ? i + 1 : nk;
            auto pr = P.row(i).head(lim).array();
            auto dr = dP.row(i).head(lim).array();
            const double s = (pr.cast<double>() * dr.cast<double>()).sum();
            dr = pr * (half * (dr - float(s)));
            dP.row(i).tail(nk - lim).setZero();
          }
          Eigen::Map<RowMat> dQ(dq + size_t(h) * n * d, n, d);
          if (bf16) {
            product_bf16(dP.data(), nk, K.data(), d, false, dQ.data(), d, n, d, nk);
            dQ *= scale * half;
            T = Q.transpose();  // dK^T = Q^T dS
            part.resize(d, nk);
            product_bf16(T.data(), n, dP.data(), nk, false, part.data(), nk, d, nk, n);
            dK += (scale * half) * part.transpose();
          } else {
            dQ.noalias() = (scale * half) * (dP * K);
            dK.noalias() += (scale * half) * (dP.transpose() * Q);
          }
        }
      },
      threads);
}

void merge_heads(const float* src, int n, int heads, int d, float* dst, int dst_stride, int col0) {
  for (int h = 0; h < heads; ++h)
    for (int t = 0; t < n; ++t)
      std::copy_n(src + (size_t(h) * n + t) * d, d,
                  dst + size_t(t) * dst_stride + col0 + size_t(h) * d);
}

}  // namespace attn::models
