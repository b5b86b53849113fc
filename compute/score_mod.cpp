#include "compute/score_mod.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace attn {

namespace {

template <typename T>
T apply_mods(const std::vector<ScoreMod>& mods, T s, int head, int n_heads, int32_t qp, int32_t kp) {
  for (const ScoreMod& m : mods) {
    switch (m.kind) {
      case ScoreMod::Kind::Temperature:
        s = s / T(m.a);
        break;
      case ScoreMod::Kind::Alibi: {
        T slope = std::exp2(-T(m.a) * T(head + 1) / T(n_heads));
        s = s - slope * T(qp - kp);
        break;
      }
      case ScoreMod::Kind::Softcap:
        s = T(m.a) * std::tanh(s / T(m.a));
        break;
    }
  }
  return s;
}

// tau with sum_j max(z_j - tau, 0)^2 = 1 for z = s / 2 (1.5-entmax, exact sort-based solve).
double entmax15_tau(const double* s, int m) {
  std::vector<double> z(s, s + m);
  for (double& x : z) x *= 0.5;
  std::sort(z.begin(), z.end(), std::greater<double>());
  double sum = 0, sum_sq = 0, tau = z[0] - 1.0;
  for (int k = 1; k <= m; ++k) {
    sum += z[k - 1];
    sum_sq += z[k - 1] * z[k - 1];
    double mean = sum / k;
    double delta = (1.0 - k * (sum_sq / k - mean * mean)) / k;
    if (delta < 0) break;
    double t = mean - std::sqrt(delta);
    if (t > z[k - 1]) break;  // support would include an entry below the threshold
    tau = t;
  }
  return tau;
}

double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

}  // namespace

float apply_score_mods(const std::vector<ScoreMod>& mods, float s, int head, int n_heads, int32_t qp,
                       int32_t kp) {
  return apply_mods<float>(mods, s, head, n_heads, qp, kp);
}

double apply_score_mods(const std::vector<ScoreMod>& mods, double s, int head, int n_heads,
                        int32_t qp, int32_t kp) {
  return apply_mods<double>(mods, s, head, n_heads, qp, kp);
}

std::string Normaliser::name() const {
  switch (kind) {
    case Kind::Softmax: return "softmax";
    case Kind::Sigmoid: return "sigmoid";
    case Kind::Relu: return a == 1.0f ? "relu" : "relu2";
    case Kind::Entmax15: return "entmax15";
    case Kind::SoftplusL1: return "softplus";
  }
  return "?";
}

double normalised_prob(const Normaliser& n, double s, double row_stat, int n_k) {
  switch (n.kind) {
    case Normaliser::Kind::Softmax:
      return std::exp(s - row_stat);
    case Normaliser::Kind::Sigmoid:
      return 1.0 / (1.0 + std::exp(-(s - std::log(double(n_k)) + n.a)));
    case Normaliser::Kind::Relu:
      return s > 0 ? std::pow(s, double(n.a)) / n_k : 0.0;
    case Normaliser::Kind::Entmax15: {
      double t = 0.5 * s - row_stat;
      return t > 0 ? t * t : 0.0;
    }
    case Normaliser::Kind::SoftplusL1:
      return std::exp(std::log(softplus(s)) - row_stat);
  }
  return 0;
}

double normaliser_row_stat(const Normaliser& n, const double* s, int m) {
  if (m <= 0) return 0;
  switch (n.kind) {
    case Normaliser::Kind::Softmax: {
      double mx = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < m; ++j) mx = std::max(mx, s[j]);
      double sum = 0;
      for (int j = 0; j < m; ++j) sum += std::exp(s[j] - mx);
      return mx + std::log(sum);
    }
    case Normaliser::Kind::Entmax15:
      return entmax15_tau(s, m);
    case Normaliser::Kind::SoftplusL1: {
      double sum = 0;
      for (int j = 0; j < m; ++j) sum += softplus(s[j]);
      return std::log(sum);
    }
    case Normaliser::Kind::Sigmoid:
    case Normaliser::Kind::Relu:
      return 0;
  }
  return 0;
}

}  // namespace attn
