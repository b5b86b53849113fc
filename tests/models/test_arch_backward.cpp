// Each layer's reverse pass (models/arch/backward.h) against central finite differences of a
// double-precision forward written here from the layer's definition (tied to the f32 forward the
// models run by comparing the two), and AttnLRP's rules by the conservation each one promises.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "compute/problem.h"
#include "models/arch/attention.h"
#include "models/arch/backward.h"
#include "models/arch/layers.h"

namespace attn {
namespace {

using models::Activation;
using models::Rule;
using Vec = std::vector<double>;

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

template <class V>
Vec to_double(const V& v) {
  return Vec(v.begin(), v.end());
}

template <class V>
void fill(V& dst, uint64_t seed, float scale = 1.0f) {
  const std::vector<float> r = randn(dst.size(), seed, scale);
  dst.assign(r.begin(), r.end());
}

// Central differences of f at x (double), step h relative to |x|.
Vec finite_difference(const std::function<double(const Vec&)>& f, Vec x) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i], h = 1e-6 * std::max(1.0, std::abs(x0));
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

// max |got - want| / max |want|.
double rel_error(const std::vector<float>& got, const Vec& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / std::max(scale, 1e-300);
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

template <class A, class B>
double dotf(const A& a, const B& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// ---- double forwards -------------------------------------------------------------------------

Vec layer_norm_d(const Vec& x, int n, int c, const std::vector<float>& g, const float* b,
                 double eps, bool rms) {
  Vec y(x.size());
  for (int t = 0; t < n; ++t) {
    const double* r = x.data() + size_t(t) * c;
    double mean = 0, var = 0;
    if (!rms) {
      for (int j = 0; j < c; ++j) mean += r[j];
      mean /= c;
    }
    for (int j = 0; j < c; ++j) var += (r[j] - mean) * (r[j] - mean);
    var /= c;
    for (int j = 0; j < c; ++j)
      y[size_t(t) * c + j] = (r[j] - mean) / std::sqrt(var + eps) * g[size_t(j)] + (b ? b[j] : 0);
  }
  return y;
}

double act_d(Activation a, double x) {
  switch (a) {
    case Activation::GeluTanh:
      return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Activation::GeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::Silu:
      return x / (1 + std::exp(-x));
    case Activation::Relu:
      return x > 0 ? x : 0;
  }
  return 0;
}

// O [N, H*d] of softmax attention over q [H,N,d], k, v [Hkv,N,d], and the patterns [H,N,N].
Vec attention_d(const Problem& p, const Vec& q, const Vec& k, const Vec& v, Vec* pattern) {
  const int H = p.n_heads, n = p.n_q, d = p.d, group = H / p.n_kv_heads;
  const double scale = p.effective_scale();
  Vec o(size_t(n) * H * d, 0.0);
  if (pattern) pattern->assign(size_t(H) * n * n, 0.0);
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    for (int i = 0; i < n; ++i) {
      const int lim = p.causal ? i + 1 : n;
      Vec s(static_cast<size_t>(lim));
      double mx = -1e300;
      for (int j = 0; j < lim; ++j) {
        double a = 0;
        for (int e = 0; e < d; ++e)
          a += q[(size_t(h) * n + i) * d + e] * k[(size_t(g) * n + j) * d + e];
        s[size_t(j)] = a * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int j = 0; j < lim; ++j) {
        const double pj = s[size_t(j)] / sum;
        if (pattern) (*pattern)[(size_t(h) * n + i) * n + j] = pj;
        for (int e = 0; e < d; ++e)
          o[size_t(i) * H * d + size_t(h) * d + e] += pj * v[(size_t(g) * n + j) * d + e];
      }
    }
  }
  return o;
}

// ---- tests ----------------------------------------------------------------------------------

TEST(LayerBackward, LinearBothLayoutsAreTheTransposedProduct) {
  const int n = 5, in = 7, out = 11;
  for (bool conv1d : {false, true}) {
    std::vector<float> w = randn(size_t(in) * out, 1), b = randn(size_t(out), 2);
    models::Linear l{{w.data()}, b.data(), in, out, conv1d};
    std::vector<float> x = randn(size_t(n) * in, 3), dy = randn(size_t(n) * out, 4);
    // z = sum dy * (x W + b): dz/dx by differences of the f32 layer's double twin.
    auto f = [&](const Vec& xd) {
      double z = 0;
      for (int t = 0; t < n; ++t)
        for (int o = 0; o < out; ++o) {
          double y = b[size_t(o)];
          for (int i = 0; i < in; ++i)
            y += xd[size_t(t) * in + i] * (conv1d ? w[size_t(i) * out + o] : w[size_t(o) * in + i]);
          z += y * dy[size_t(t) * out + o];
        }
      return z;
    };
    std::vector<float> dx(x.size(), 1.0f);
    models::linear_backward(dy.data(), n, l, dx.data(), false, 1);
    EXPECT_LE(rel_error(dx, finite_difference(f, to_double(x))), 1e-5) << conv1d;
    std::vector<float> acc(x.size(), 1.0f);
    models::linear_backward(dy.data(), n, l, acc.data(), true, 1);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(acc[i], dx[i] + 1.0f, 1e-5);
  }
}

TEST(LayerBackward, LayerNormAndRmsNormMatchFiniteDifferences) {
  const int n = 3, c = 37;
  std::vector<float> x = randn(size_t(n) * c, 5, 2.0f), g = randn(size_t(c), 6),
                     b = randn(size_t(c), 7), dy = randn(size_t(n) * c, 8);
  for (bool rms : {false, true}) {
    const double eps = 1e-5;
    // The double twin is the f32 layer.
    std::vector<float> y(x.size());
    if (rms)
      models::rms_norm(x.data(), n, c, g.data(), float(eps), y.data(), 1);
    else
      models::layer_norm(x.data(), n, c, g.data(), b.data(), float(eps), y.data(), 1);
    EXPECT_LE(rel_error(y, layer_norm_d(to_double(x), n, c, g, rms ? nullptr : b.data(), eps, rms)),
              1e-5);
    auto f = [&](const Vec& xd) {
      return dot(layer_norm_d(xd, n, c, g, rms ? nullptr : b.data(), eps, rms), to_double(dy));
    };
    std::vector<float> dx(x.size());
    if (rms)
      models::rms_norm_backward(x.data(), n, c, g.data(), float(eps), dy.data(), dx.data(),
                                Rule::Gradient, false, 1);
    else
      models::layer_norm_backward(x.data(), n, c, g.data(), float(eps), dy.data(), dx.data(),
                                  Rule::Gradient, false, 1);
    EXPECT_LE(rel_error(dx, finite_difference(f, to_double(x))), 1e-5) << (rms ? "rms" : "ln");
  }
}

TEST(LayerBackward, ActivationsMatchFiniteDifferences) {
  const size_t n = 301;
  std::vector<float> x = randn(n, 9, 3.0f), dy = randn(n, 10);
  x[0] = 0.0f;
  for (Activation a :
       {Activation::GeluTanh, Activation::GeluErf, Activation::Silu, Activation::Relu}) {
    std::vector<float> y = x;
    models::activate(a, y.data(), n, 1);
    Vec yd(n);
    for (size_t i = 0; i < n; ++i) yd[i] = act_d(a, x[i]);
    EXPECT_LE(rel_error(y, yd), 1e-5) << int(a);
    auto f = [&](const Vec& xd) {
      double z = 0;
      for (size_t i = 0; i < n; ++i) z += act_d(a, xd[i]) * dy[i];
      return z;
    };
    std::vector<float> g = dy;
    models::activate_backward(a, x.data(), g.data(), n, Rule::Gradient, 1);
    Vec fd = finite_difference(f, to_double(x));
    if (a == Activation::Relu) fd[0] = g[0];  // no derivative at the kink
    EXPECT_LE(rel_error(g, fd), 1e-5) << int(a);
  }
}

TEST(LayerBackward, GatedActivationMatchesFiniteDifferences) {
  const size_t n = 97;
  std::vector<float> gate = randn(n, 11, 2.0f), up = randn(n, 12), dy = randn(n, 13);
  auto f = [&](const Vec& v) {  // v = [gate, up]
    double z = 0;
    for (size_t i = 0; i < n; ++i) z += act_d(Activation::Silu, v[i]) * v[n + i] * dy[i];
    return z;
  };
  Vec both = to_double(gate);
  for (float u : up) both.push_back(u);
  const Vec fd = finite_difference(f, both);
  std::vector<float> dg(n), du(n);
  models::gated_backward(Activation::Silu, gate.data(), up.data(), dy.data(), dg.data(), du.data(),
                         n, Rule::Gradient, 1);
  EXPECT_LE(rel_error(dg, Vec(fd.begin(), fd.begin() + long(n))), 1e-5);
  EXPECT_LE(rel_error(du, Vec(fd.begin() + long(n), fd.end())), 1e-5);
}

struct AttnCase {
  int H, Hkv, n, d;
  bool causal;
};

// dq, dk, dv by differences of the double attention; dz/dA as dO V^T (O is linear in A).
void check_attention(const AttnCase& c, uint64_t seed) {
  Problem p = models::layer_problem(c.H, c.Hkv, c.n, c.d, c.causal);
  fill(p.q, seed, 1.5f);
  fill(p.k, seed + 1, 1.5f);
  fill(p.v, seed + 2);
  const std::vector<float> dout = randn(size_t(c.n) * c.H * c.d, seed + 3);
  Vec pat;
  attention_d(p, to_double(p.q), to_double(p.k), to_double(p.v), &pat);
  std::vector<float> pattern(pat.begin(), pat.end());
  std::vector<float> dq(p.q.size()), dk(p.k.size()), dv(p.v.size()), dp(pattern.size());
  models::attention_backward(p, pattern.data(), dout.data(), dq.data(), dk.data(), dv.data(),
                             dp.data(), Rule::Gradient, 2);
  const Vec q = to_double(p.q), k = to_double(p.k), v = to_double(p.v), g = to_double(dout);
  auto fq = [&](const Vec& x) { return dot(attention_d(p, x, k, v, nullptr), g); };
  auto fk = [&](const Vec& x) { return dot(attention_d(p, q, x, v, nullptr), g); };
  auto fv = [&](const Vec& x) { return dot(attention_d(p, q, k, x, nullptr), g); };
  const std::string what = std::to_string(c.H) + "/" + std::to_string(c.Hkv) +
                           " n=" + std::to_string(c.n) + (c.causal ? " causal" : "");
  EXPECT_LE(rel_error(dq, finite_difference(fq, q)), 1e-5) << what;
  EXPECT_LE(rel_error(dk, finite_difference(fk, k)), 1e-5) << what;
  EXPECT_LE(rel_error(dv, finite_difference(fv, v)), 1e-5) << what;
  Vec want_dp(dp.size(), 0.0);
  const int group = c.H / c.Hkv;
  for (int h = 0; h < c.H; ++h)
    for (int i = 0; i < c.n; ++i)
      for (int j = 0; j < c.n; ++j)
        for (int e = 0; e < c.d; ++e)
          want_dp[(size_t(h) * c.n + i) * c.n + j] +=
              g[size_t(i) * c.H * c.d + size_t(h) * c.d + e] *
              v[(size_t(h / group) * c.n + j) * c.d + e];
  EXPECT_LE(rel_error(dp, want_dp), 1e-5) << what;
}

TEST(LayerBackward, AttentionMatchesFiniteDifferences) {
  check_attention({2, 2, 13, 8, false}, 20);  // bidirectional (BERT, ViT)
  check_attention({4, 2, 17, 8, true}, 30);   // grouped-query, causal (Llama)
  check_attention({3, 1, 9, 5, true}, 40);    // multi-query, odd head dimension
}

TEST(LayerBackward, MergeHeadsInvertsSplitHeads) {
  const int n = 7, H = 3, d = 5, stride = 2 * H * d + 3;
  std::vector<float> src = randn(size_t(n) * stride, 50), heads(size_t(H) * n * d);
  models::split_heads(src.data(), n, stride, H * d, H, d, heads.data());
  std::vector<float> back(src.size(), 0.0f);
  models::merge_heads(heads.data(), n, H, d, back.data(), stride, H * d);
  for (int t = 0; t < n; ++t)
    for (int j = H * d; j < 2 * H * d; ++j)
      EXPECT_EQ(back[size_t(t) * stride + j], src[size_t(t) * stride + j]);
}

// ---- AttnLRP: each rule conserves what it promises ------------------------------------------

TEST(LrpRules, NormsConserveRelevanceWithoutTheirBias) {
  const int n = 4, c = 29;
  std::vector<float> x = randn(size_t(n) * c, 60, 2.0f), g = randn(size_t(c), 61),
                     dy = randn(size_t(n) * c, 62);
  for (bool rms : {false, true}) {
    std::vector<float> y(x.size()), dx(x.size());
    if (rms) {
      models::rms_norm(x.data(), n, c, g.data(), 1e-6f, y.data(), 1);
      models::rms_norm_backward(x.data(), n, c, g.data(), 1e-6f, dy.data(), dx.data(), Rule::Lrp,
                                false, 1);
    } else {
      models::layer_norm(x.data(), n, c, g.data(), nullptr, 1e-6f, y.data(), 1);
      models::layer_norm_backward(x.data(), n, c, g.data(), 1e-6f, dy.data(), dx.data(), Rule::Lrp,
                                  false, 1);
    }
    // Relevance in (x . dx) equals relevance out (y . dy), row by row summed.
    EXPECT_NEAR(dotf(x, dx), dotf(y, dy), 1e-4 * std::abs(dotf(y, dy))) << rms;
    // The gradient rule does not conserve it (the 1/std factor's share goes elsewhere).
    std::vector<float> gx(x.size());
    if (rms)
      models::rms_norm_backward(x.data(), n, c, g.data(), 1e-6f, dy.data(), gx.data(),
                                Rule::Gradient, false, 1);
    else
      models::layer_norm_backward(x.data(), n, c, g.data(), 1e-6f, dy.data(), gx.data(),
                                  Rule::Gradient, false, 1);
    EXPECT_NEAR(dotf(x, gx), 0.0, 1e-3 * std::abs(dotf(y, dy))) << rms;  // scale invariance
  }
}

TEST(LrpRules, ActivationsPassRelevanceElementwise) {
  const size_t n = 64;
  std::vector<float> x = randn(n, 70, 2.0f), dy = randn(n, 71), up = randn(n, 72);
  for (Activation a : {Activation::GeluTanh, Activation::GeluErf, Activation::Silu}) {
    std::vector<float> y = x, g = dy;
    models::activate(a, y.data(), n, 1);
    models::activate_backward(a, x.data(), g.data(), n, Rule::Lrp, 1);
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(x[i] * g[i], y[i] * dy[i], 1e-5) << int(a);
  }
  // SwiGLU: the uniform rule gives each factor half of act(gate) * up's relevance.
  std::vector<float> dg(n), du(n), a = x;
  models::activate(Activation::Silu, a.data(), n, 1);
  models::gated_backward(Activation::Silu, x.data(), up.data(), dy.data(), dg.data(), du.data(), n,
                         Rule::Lrp, 1);
  for (size_t i = 0; i < n; ++i) {
    const double r = double(a[i]) * up[i] * dy[i];
    EXPECT_NEAR(x[i] * dg[i], 0.5 * r, 1e-5);
    EXPECT_NEAR(up[i] * du[i], 0.5 * r, 1e-5);
  }
}

TEST(LrpRules, AttentionSplitsRelevanceUniformly) {
  for (bool causal : {false, true}) {
    Problem p = models::layer_problem(4, 2, 11, 6, causal);
    fill(p.q, 80, 1.5f);
    fill(p.k, 81, 1.5f);
    fill(p.v, 82);
    const std::vector<float> dout = randn(size_t(11) * 4 * 6, 83);
    Vec pat;
    const Vec o = attention_d(p, to_double(p.q), to_double(p.k), to_double(p.v), &pat);
    std::vector<float> pattern(pat.begin(), pat.end());
    std::vector<float> dq(p.q.size()), dk(p.k.size()), dv(p.v.size()), dp(pattern.size());
    models::attention_backward(p, pattern.data(), dout.data(), dq.data(), dk.data(), dv.data(),
                               dp.data(), Rule::Lrp, 1);
    // P V: the values get half of the output's relevance.
    EXPECT_NEAR(dotf(p.v, dv), 0.5 * dot(o, to_double(dout)),
                1e-4 * std::abs(dot(o, to_double(dout))));
    // Q K^T: queries and keys get equal halves of the scores' relevance.
    EXPECT_NEAR(dotf(p.q, dq), dotf(p.k, dk), 1e-4 * std::abs(dotf(p.q, dq)));
    // Under the gradient rule the halves are whole: twice the values' relevance.
    std::vector<float> gv(dv.size()), gq(dq.size()), gk(dk.size());
    models::attention_backward(p, pattern.data(), dout.data(), gq.data(), gk.data(), gv.data(),
                               nullptr, Rule::Gradient, 1);
    EXPECT_NEAR(dotf(p.v, gv), 2 * dotf(p.v, dv), 1e-4 * std::abs(dotf(p.v, gv)));
    EXPECT_NEAR(dotf(p.q, gq), 4 * dotf(p.q, dq), 1e-4 * std::abs(dotf(p.q, gq)));
  }
}

}  // namespace
}  // namespace attn
