// Attention-level analysis of a variant on the layers a forward pass captured: the variant and
// dense softmax run on each layer's Q/K/V (in layer order, sharing the variant's sequence state),
// compared per layer (all heads) and per head with compute/metrics.h compare().
#pragma once
#include <vector>

#include "compute/backend.h"
#include "compute/metrics.h"

namespace attn {

struct LayerAnalysis {
  int layer = 0;
  Metrics all;                 // every head of the layer together
  std::vector<Metrics> heads;  // [H], one head each
};

// Dense softmax results of each problem (the reference every comparison uses).
std::vector<Result> dense_layers(const std::vector<const Problem*>& problems, Backend& backend,
                                 const RunOptions& opt = {});

// `dense[l]` must be dense_layers()' result for problems[l]. `layers[l]` names problem l's layer.
std::vector<LayerAnalysis> analyze_layers(const Variant& v,
                                          const std::vector<const Problem*>& problems,
                                          const std::vector<int>& layers,
                                          const std::vector<Result>& dense, Backend& backend,
                                          const RunOptions& opt = {});

// The problem restricted to `heads` (query heads), each with its own copy of its K/V head.
Problem select_heads(const Problem& p, const std::vector<int>& heads);
// Head h of a problem (with its key/value head) and of a result of it, as one-head objects.
Problem head_problem(const Problem& p, int h);
Result head_result(const Result& r, const Problem& p, int h);

// Attention rollout (Abnar & Zuidema 2020) for a variant run on every layer: the product over
// layers of 0.5 mean_h(A_l) + 0.5 I, row `from` (the CLS token of a ViT), over all N keys.
// Materialises N x N per layer, so it is for short inputs (images are ~50 tokens): empty above
// `max_tokens`.
std::vector<double> attention_rollout(const Variant& v, const std::vector<Problem>& layers,
                                      const std::vector<Result>& results, int from = 0,
                                      int max_tokens = 1024);

}  // namespace attn
