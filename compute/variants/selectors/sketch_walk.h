// Sketch&Walk block selection ("Scout Before You Attend: Sketch-and-Walk Sparse Attention for
// Efficient LLM Inference"). Per head, block attention is estimated cheaply from Hadamard sketches
// of mean-pooled query and key blocks:
//     A(r, c) = softmax_c( scale * S(qbar_r) . S(kbar_c) + log n(r, c) )   over visible blocks,
// and a walk accumulates it across the layers of one forward pass (attention rollout over
// blocks):
//     W_1 = A_1,  W_l = rownorm(A_l W_{l-1}),
// restarted whenever the block attention is not square (n_q != n_k) or its shape or head count
// changes between layers. Each query block keeps the current block and the first block, then the
// blocks with the best score 0.5 A + 0.5 W (ties to the lower index) up to
// round(density x visible blocks), so the kept fraction of visible blocks is about `density`.
#pragma once
#include <vector>

#include "compute/variant.h"

namespace attn {

// The walk carried across layers: one row-stochastic [n_b, n_b] matrix per head.
struct WalkState : SequenceState {
  int n_heads = 0, n_b = 0;
  int layers = 0;                      // layers accumulated since the last restart
  std::vector<std::vector<double>> w;  // f64 [H][n_b * n_b], row-major
};

}  // namespace attn
