// What a backend returns: the output, the kept layout, the normaliser's row statistics (so any
// probability can be recomputed without storing N x N) and honest stats.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compute/layout.h"
#include "compute/precision.h"
#include "compute/variant.h"

namespace attn {

// What an approximation leaves for its implied-matrix queries (compute/approximation.h).
struct ApproxState {
  virtual ~ApproxState() = default;
  // The same state for query head h alone (head_result() in layer_analysis.h).
  virtual std::shared_ptr<const ApproxState> head(int h) const = 0;
};

struct Stats {
  std::string backend;                   // backend that actually ran ("cpu", "reference", "vulkan")
  Precision precision = Precision::F32;  // storage of Q, K, V in the kernels that ran
  Cost predicted;                        // from the variant's cost model
  Cost counted;               // work the kernels actually did (entries computed x 4d, + selector)
  double density = 1.0;       // kept entries / visible entries, exact, mean over heads
  int64_t kept_entries = 0;   // summed over heads
  double select_seconds = 0;  // building the layout
  double kernel_seconds = 0;  // attention kernels
  double wall_seconds = 0;    // everything, end to end
};

struct Result {
  int n_heads = 0, n_q = 0, d = 0;
  std::vector<float> o;         // f32 [H, n_q, d]
  std::vector<float> row_stat;  // f32 [H, n_q]: softmax lse, entmax tau, softplus log-sum; 0 else
  Layout layout;                // the kept set that was executed
  std::shared_ptr<const ApproxState> approx;  // approximations only: what the implied matrix needs
  Stats stats;

  const float* o_row(int h, int i) const { return o.data() + (size_t(h) * n_q + i) * d; }
};

}  // namespace attn
