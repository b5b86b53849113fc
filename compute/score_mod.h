// Score modifiers and normalisers as small value types, so kernels can switch once per tile
// and keep inner loops vectorisable.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attn {

// s' = f(s, head, q position, k position), applied to the scaled score s = scale * q.k.
struct ScoreMod {
  enum class Kind {
    Temperature,  // s / t                                 (a = t)
    Alibi,        // s - slope_h * (qp - kp), slope_h = 2^(-a*(h+1)/H), a = 8 (Press et al. 2022)
    Softcap,      // c * tanh(s / c)                        (a = c; Gemma 2)
  };
  Kind kind = Kind::Temperature;
  float a = 1.0f;
};

// Applies mods in order to one score.
float apply_score_mods(const std::vector<ScoreMod>& mods, float s, int head, int n_heads,
                       int32_t qp, int32_t kp);
double apply_score_mods(const std::vector<ScoreMod>& mods, double s, int head, int n_heads,
                        int32_t qp, int32_t kp);

// Maps a row of modified scores over the kept keys to probabilities.
struct Normaliser {
  enum class Kind {
    Softmax,     // exp(s - lse); row stat = lse (log-sum-exp over kept keys)
    Sigmoid,     // sigmoid(s + b), b = -log(n_k) + a (Ramapuram et al. 2024); no row stat
    Relu,        // max(s, 0)^a / n_k (a = 1: ReLU, a = 2: ReLU^2; Wortsman et al. 2023)
    Entmax15,    // [s/2 - tau]_+^2, tau so the row sums to 1 (Peters et al. 2019); row stat = tau
    SoftplusL1,  // softplus(s) / sum softplus; row stat = log sum softplus
  };
  Kind kind = Kind::Softmax;
  float a = 0.0f;

  // Rows sum to one (row KL against the dense reference is defined).
  bool normalised() const { return kind == Kind::Softmax || kind == Kind::Entmax15 || kind == Kind::SoftplusL1; }
  std::string name() const;
};

// Probability of one entry from its modified score and its row statistic; `n_k` is the
// problem's key count (used by Sigmoid and Relu). Zero for rows with no kept key.
double normalised_prob(const Normaliser& n, double s, double row_stat, int n_k);

// Row statistic from the modified scores of the kept keys (row of length m), in double.
double normaliser_row_stat(const Normaliser& n, const double* s, int m);

}  // namespace attn
