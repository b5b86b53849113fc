// Normalisers: softmax and the alternatives from the literature (sigmoid, ReLU, ReLU^2,
// 1.5-entmax, softplus/L1). The arithmetic lives in compute/score_mod.cpp, where kernels switch on
// Normaliser::Kind once per row.
#include "compute/variants/modifiers/normalisers.h"

#include "compute/variants/patterns.h"

namespace attn {

namespace {

VariantInfo softmax_info() {
  return {"softmax",
          "Softmax",
          "normaliser",
          kVaswaniSource,
          "exp(s) normalised over the kept keys (the default).",
          {}};
}
Normaliser make_softmax(const Params&) {
  return {Normaliser::Kind::Softmax, 0.0f};
}

VariantInfo sigmoid_info() {
  return {"sigmoid",
          "Sigmoid",
          "normaliser",
          "Ramapuram et al. 2024, Theory, Analysis, and Best Practices for Sigmoid "
          "Self-Attention",
          "Independent sigmoid(s + b) per entry, b = -log(n_k) + bias_offset; rows do not "
          "sum to one.",
          {float_param("bias_offset", -100, 100, 0, "added to the -log(n_k) bias")}};
}
Normaliser make_sigmoid(const Params& params) {
  return {Normaliser::Kind::Sigmoid, float(params.at("bias_offset"))};
}

VariantInfo relu_info() {
  return {"relu",
          "ReLU",
          "normaliser",
          "Wortsman, Lee, Gilmer, Kornblith 2023, Replacing softmax with ReLU in Vision "
          "Transformers",
          "max(s, 0) / n_k per entry; rows do not sum to one.",
          {}};
}
Normaliser make_relu(const Params&) {
  return {Normaliser::Kind::Relu, 1.0f};
}

VariantInfo relu2_info() {
  return {"relu2",
          "Squared ReLU",
          "normaliser",
          "Hua, Dai, Liu, Le 2022, Transformer Quality in Linear Time",
          "max(s, 0)^2 / n_k per entry; rows do not sum to one.",
          {}};
}
Normaliser make_relu2(const Params&) {
  return {Normaliser::Kind::Relu, 2.0f};
}

VariantInfo entmax15_info() {
  return {"entmax15",
          "1.5-entmax",
          "normaliser",
          "Peters, Niculae, Martins 2019, Sparse Sequence-to-Sequence Models",
          "Sparse normaliser: [s/2 - tau]_+^2 with tau making each row sum to one.",
          {}};
}
Normaliser make_entmax15(const Params&) {
  return {Normaliser::Kind::Entmax15, 0.0f};
}

VariantInfo softplus_info() {
  return {"softplus",
          "Softplus / L1",
          "normaliser",
          "Gao, Spratling 2025, Softplus Attention with Re-weighting Boosts Length "
          "Extrapolation in Large Language Models",
          "softplus(s) normalised by its row sum (an L1-normalised, non-exponential "
          "softmax).",
          {}};
}
Normaliser make_softplus(const Params&) {
  return {Normaliser::Kind::SoftplusL1, 0.0f};
}

}  // namespace

const NormaliserFactory kSoftmaxNormaliser = {softmax_info, make_softmax};
const NormaliserFactory kSigmoidNormaliser = {sigmoid_info, make_sigmoid};
const NormaliserFactory kReluNormaliser = {relu_info, make_relu};
const NormaliserFactory kRelu2Normaliser = {relu2_info, make_relu2};
const NormaliserFactory kEntmax15Normaliser = {entmax15_info, make_entmax15};
const NormaliserFactory kSoftplusNormaliser = {softplus_info, make_softplus};

}  // namespace attn
