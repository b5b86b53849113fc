#include "models/arch/backward.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "compute/error.h"
#include "compute/parallel.h"

namespace attn::models {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

// d act(x)/dx.
double act_derivative(Activation act, double x) {
  switch (act) {
    case Activation::GeluTanh: {
      const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
      const double t = std::tanh(u);
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * 0.044715 * x * x);
    }
    case Activation::GeluErf:
      return 0.5 * (1 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    case Activation::Silu: {
      const double s = 1 / (1 + std::exp(-x));
      return s * (1 + x * (1 - s));
    }
    case Activation::Relu:
      return x > 0 ? 1 : 0;
  }
  return 0;
}

// act(x) / x, the identity rule's factor; every activation here is x times a gate, so the ratio
// is the gate itself and is defined at 0 too.
double act_ratio(Activation act, double x) {
  switch (act) {
    case Activation::GeluTanh:
      return 0.5 * (1 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    case Activation::GeluErf:
      return 0.5 * (1 + std::erf(x * kInvSqrt2));
    case Activation::Silu:
      return 1 / (1 + std::exp(-x));
    case Activation::Relu:
      return x > 0 ? 1 : 0;
  }
  return 0;
}

double act_value(Activation act, double x) {
  return x * act_ratio(act, x);
}

template <typename Fn>
void rows_parallel(int n, int threads, Fn fn) {
  parallel_for(n, fn, std::min(thread_count(threads), std::max(1, n / 8)));
}

template <typename Fn>
void elements_parallel(size_t count, int threads, Fn fn) {
  const int pieces =
      int(std::min<size_t>(size_t(thread_count(threads)) * 4, (count + 4095) / 4096));
  if (pieces <= 1) {
    for (size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  parallel_for(
      pieces,
      [&](int k) {
        const size_t b = count * size_t(k) / size_t(pieces),
                     e = count * size_t(k + 1) / size_t(pieces);
        for (size_t i = b; i < e; ++i) fn(i);
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

void layer_norm_backward(const float* x, int n, int c, const float* gamma, float eps,
                         const float* dy, float* dx, Rule rule, bool accumulate, int threads) {
  rows_parallel(n, threads, [&](int t) {
    const float* xr = x + size_t(t) * c;
    const float* gr = dy + size_t(t) * c;
    float* out = dx + size_t(t) * c;
    double mean = 0, var = 0;
    for (int j = 0; j < c; ++j) mean += xr[j];
    mean /= c;
    for (int j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= c;
    const double r = 1 / std::sqrt(var + eps);
    double mg = 0, mgx = 0;  // mean(gy), mean(gy * xhat)
    for (int j = 0; j < c; ++j) {
      const double gy = double(gr[j]) * gamma[j];
      mg += gy;
      mgx += gy * (xr[j] - mean) * r;
    }
    mg /= c;
    mgx /= c;
    if (rule == Rule::Lrp) mgx = 0;  // 1/std held constant: only the mean's subtraction remains
    for (int j = 0; j < c; ++j) {
      const double gy = double(gr[j]) * gamma[j];
      const double v = r * (gy - mg - (xr[j] - mean) * r * mgx);
      out[j] = float(accumulate ? out[j] + v : v);
    }
  });
}

void rms_norm_backward(const float* x, int n, int c, const float* gamma, float eps, const float* dy,
                       float* dx, Rule rule, bool accumulate, int threads) {
  rows_parallel(n, threads, [&](int t) {
    const float* xr = x + size_t(t) * c;
    const float* gr = dy + size_t(t) * c;
    float* out = dx + size_t(t) * c;
    double ms = 0;
    for (int j = 0; j < c; ++j) ms += double(xr[j]) * xr[j];
    ms /= c;
    const double r = 1 / std::sqrt(ms + eps);
    double mgx = 0;  // mean(gy * x)
    for (int j = 0; j < c; ++j) mgx += double(gr[j]) * gamma[j] * xr[j];
    mgx /= c;
    if (rule == Rule::Lrp) mgx = 0;
    for (int j = 0; j < c; ++j) {
      const double v = r * (double(gr[j]) * gamma[j] - xr[j] * r * r * mgx);
      out[j] = float(accumulate ? out[j] + v : v);
    }
  });
}

void activate_backward(Activation act, const float* pre, float* g, size_t count, Rule rule,
                       int threads) {
  elements_parallel(count, threads, [&](size_t i) {
    const double f = rule == Rule::Lrp ? act_ratio(act, pre[i]) : act_derivative(act, pre[i]);
    g[i] = float(g[i] * f);
  });
}

void gated_backward(Activation act, const float* gate, const float* up, const float* dy,
                    float* dgate, float* dup, size_t count, Rule rule, int threads) {
  // y = a * up with a = act(gate); the uniform rule halves both factors' share under LRP.
  const double half = rule == Rule::Lrp ? 0.5 : 1.0;
  elements_parallel(count, threads, [&](size_t i) {
    const double a = act_value(act, gate[i]), g = dy[i];
    const double f = rule == Rule::Lrp ? act_ratio(act, gate[i]) : act_derivative(act, gate[i]);
    dup[i] = float(half * g * a);
    dgate[i] = float(half * g * up[i] * f);
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
        RowMat dP(n, nk);
        for (int h = g * group; h < (g + 1) * group; ++h) {
          Eigen::Map<const RowMat> P(pattern + size_t(h) * n * nk, n, nk);
          Eigen::Map<const RowMat> Q(p.q.data() + size_t(h) * n * d, n, d);
          Strided dO(d_out + size_t(h) * d, n, d, Eigen::OuterStride<>(hd));
          dP.noalias() = dO * V.transpose();
          if (d_pattern) Eigen::Map<RowMat>(d_pattern + size_t(h) * n * nk, n, nk) = dP;
          dV.noalias() += half * (P.transpose() * dO);
          // Softmax: dS = P * (half dP - rowsum(P * half dP)); the QK^T product halves again.
          for (int i = 0; i < n; ++i) {
            double s = 0;
            for (int j = 0; j < nk; ++j) s += double(P(i, j)) * dP(i, j);
            for (int j = 0; j < nk; ++j) dP(i, j) = P(i, j) * half * float(dP(i, j) - s);
          }
          Eigen::Map<RowMat> dQ(dq + size_t(h) * n * d, n, d);
          dQ.noalias() = (scale * half) * (dP * K);
          dK.noalias() += (scale * half) * (dP.transpose() * Q);
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
