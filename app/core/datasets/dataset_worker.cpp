#include "app/core/datasets/dataset_worker.h"

#include "compute/fallback.h"

namespace attn::core {

DatasetWorker::DatasetWorker(const Variant& variant, const DatasetEvalOptions& o)
    : backend(make_backend_with_fallback(o.backend)) {
  sub.variant = &variant;
  sub.backend = backend.get();
  sub.run.threads = 1;
  sub.run.cancel = o.cancel;
  substituted.substitution = &sub;
  substituted.threads = plain.threads = 1;
}

SubstitutedCost substituted_cost(const models::ModelOutput& out) {
  SubstitutedCost c;
  double density = 0;
  for (const models::SubstitutedLayer& s : out.substituted) {
    density += s.stats.density;
    c.flops += s.stats.counted.flops;
  }
  if (!out.substituted.empty()) c.density = density / double(out.substituted.size());
  return c;
}

}  // namespace attn::core
