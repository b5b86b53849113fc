// One worker of a dataset evaluation (dataset_eval.h, text_dataset_eval.h): a backend of its own
// (a backend runs one call at a time) and the forward options that substitute the variant through
// it on one thread, since the records, not the heads, run in parallel (parallel_items in
// compute/parallel.h); and what a substituted forward pass kept and counted.
#pragma once
#include <memory>

#include "app/core/datasets/dataset_eval.h"
#include "compute/backend.h"
#include "compute/variant.h"
#include "models/arch/substitution.h"

namespace attn::core {

struct DatasetWorker {
  DatasetWorker(const Variant& variant, const DatasetEvalOptions& o);
  DatasetWorker(const DatasetWorker&) = delete;  // the options point into it
  DatasetWorker& operator=(const DatasetWorker&) = delete;

  std::unique_ptr<Backend> backend;    // o.backend, with the cpu fallback
  models::Substitution sub;            // the variant in every layer and head, on one thread
  models::ForwardOptions substituted;  // the forward pass with `sub`
  models::ForwardOptions plain;        // the dense forward pass, also on one thread
};

// A substituted forward pass's attention: kept / visible entries, mean over the substituted
// layers (1 when none was), and the counted flops, summed over them.
struct SubstitutedCost {
  double density = 1;
  double flops = 0;
};
SubstitutedCost substituted_cost(const models::ModelOutput& out);

}  // namespace attn::core
