// Normalisers: softmax and the alternatives from the literature (sigmoid, ReLU, ReLU^2,
// 1.5-entmax, softplus/L1). The arithmetic lives in compute/score_mod.cpp, where kernels switch on
// Normaliser::Kind once per row.
#include "compute/variants/modifiers/normalisers.h"

#include "compute/variants/patterns.h"

namespace attn {

const std::vector<ModifierEntry<Normaliser>>& normaliser_table() {
  using K = Normaliser::Kind;
  static const std::vector<ModifierEntry<Normaliser>> table = {
      {.info = {"softmax",
                "Softmax",
                "normaliser",
                kVaswaniSource,
                "exp(s) normalised over the kept keys (the default).",
                {}},
       .kind = K::Softmax},
      {.info = {"sigmoid",
                "Sigmoid",
                "normaliser",
                "Ramapuram et al. 2024, Theory, Analysis, and Best Practices for Sigmoid "
                "Self-Attention",
                "Independent sigmoid(s + b) per entry, b = -log(n_k) + bias_offset; rows do not "
                "sum to one.",
                {float_param("bias_offset", -100, 100, 0, "added to the -log(n_k) bias")}},
       .kind = K::Sigmoid,
       .a_param = "bias_offset"},
      {.info = {"relu",
                "ReLU",
                "normaliser",
                "Wortsman, Lee, Gilmer, Kornblith 2023, Replacing softmax with ReLU in Vision "
                "Transformers",
                "max(s, 0) / n_k per entry; rows do not sum to one.",
                {}},
       .kind = K::Relu,
       .a = 1.0f},
      {.info = {"relu2",
                "Squared ReLU",
                "normaliser",
                "Hua, Dai, Liu, Le 2022, Transformer Quality in Linear Time",
                "max(s, 0)^2 / n_k per entry; rows do not sum to one.",
                {}},
       .kind = K::Relu,
       .a = 2.0f},
      {.info = {"entmax15",
                "1.5-entmax",
                "normaliser",
                "Peters, Niculae, Martins 2019, Sparse Sequence-to-Sequence Models",
                "Sparse normaliser: [s/2 - tau]_+^2 with tau making each row sum to one.",
                {}},
       .kind = K::Entmax15},
      {.info = {"softplus",
                "Softplus / L1",
                "normaliser",
                "Gao, Spratling 2025, Softplus Attention with Re-weighting Boosts Length "
                "Extrapolation in Large Language Models",
                "softplus(s) normalised by its row sum (an L1-normalised, non-exponential "
                "softmax).",
                {}},
       .kind = K::SoftplusL1},
  };
  return table;
}

}  // namespace attn
