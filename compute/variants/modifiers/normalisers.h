// Factories of the normalisers (scores of the kept keys -> probabilities, see
// compute/score_mod.h), one table entry each, registered like the patterns in patterns.h.
// `make(params)` expects parameters already resolved by resolve_params.
#pragma once
#include "compute/score_mod.h"
#include "compute/variant.h"

namespace attn {

struct NormaliserFactory {
  VariantInfo (*info)();
  Normaliser (*make)(const Params& params);
};

extern const NormaliserFactory kSoftmaxNormaliser;   // softmax (the default)
extern const NormaliserFactory kSigmoidNormaliser;   // sigmoid(bias_offset)
extern const NormaliserFactory kReluNormaliser;      // relu
extern const NormaliserFactory kRelu2Normaliser;     // relu2
extern const NormaliserFactory kEntmax15Normaliser;  // entmax15
extern const NormaliserFactory kSoftplusNormaliser;  // softplus

}  // namespace attn
