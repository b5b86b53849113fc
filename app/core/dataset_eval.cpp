#include "app/core/dataset_eval.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <tuple>

#include "app/core/head_atlas.h"
#include "app/core/labels.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/fallback.h"
#include "compute/parallel.h"
#include "compute/registry.h"
#include "models/arch/substitution.h"

namespace attn::core {

DatasetEval evaluate_image_dataset(const Model& model, const ImageDataset& d,
                                   const std::string& spec, const std::vector<int32_t>* dense,
                                   const DatasetEvalOptions& o) {
  const ModelInfo& info = model.info();
  require(info.vision, ErrorCode::InvalidArgument,
          info.dir + " is a text model: an image dataset needs a vision model");
  require(!dense || dense->size() == d.records.size(), ErrorCode::InvalidArgument,
          "dataset evaluation: the dense predictions are for another dataset");
  const Variant variant = make_variant(spec);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = int64_t(d.records.size());
  DatasetEval e;
  e.spec = spec;
  e.records = n;
  e.predicted.assign(size_t(n), -1);
  // Images in parallel, each forward pass on one thread with its own backend (a backend runs one
  // call at a time); per-image sums combined at the end in record order.
  std::vector<double> density(size_t(n), 0.0), flops(size_t(n), 0.0);
  const int workers =
      std::max(1, std::min<int>(thread_count(o.threads), int(std::max<int64_t>(n, 1))));
  std::atomic<int64_t> next{0};
  std::mutex error_mu;
  std::exception_ptr error;
  parallel_for(
      workers,
      [&](int) {
        try {
          auto backend = make_backend_with_fallback(o.backend);
          Substitution sub;
          sub.variant = &variant;
          sub.backend = backend.get();
          sub.run.threads = 1;
          sub.run.cancel = o.cancel;
          ForwardOptions fo;
          fo.substitution = &sub;
          fo.threads = 1;
          ModelInput in;
          for (int64_t i = next++; i < n; i = next++) {
            if (o.cancel && o.cancel->load(std::memory_order_relaxed)) break;
            in.image = model.preprocessor()(d.records[size_t(i)].image);
            const ModelOutput out = model.forward(in, fo);
            require(out.n_logits > 0 && out.logits.size() >= size_t(out.n_logits),
                    ErrorCode::InvalidArgument, info.dir + ": the model gives no class logits");
            e.predicted[size_t(i)] =
                int32_t(std::max_element(out.logits.begin(), out.logits.begin() + out.n_logits) -
                        out.logits.begin());
            double dens = 0, fl = 0;
            for (const SubstitutedLayer& s : out.substituted) {
              dens += s.stats.density;
              fl += s.stats.counted.flops;
            }
            density[size_t(i)] =
                out.substituted.empty() ? 1.0 : dens / double(out.substituted.size());
            flops[size_t(i)] = fl;
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
          next = n;  // the other workers stop too
        }
      },
      workers);
  if (error) std::rethrow_exception(error);
  require(!(o.cancel && o.cancel->load()), ErrorCode::Cancelled, "dataset evaluation cancelled");
  int64_t right = 0, same = 0;
  std::vector<double> correct, drop;  // per labelled image: 1 when right; dense's right - mine
  for (int64_t i = 0; i < n; ++i) {
    const ImageRecord& r = d.records[size_t(i)];
    if (r.label >= 0) {
      ++e.labelled;
      const bool mine = e.predicted[size_t(i)] == r.label;
      right += mine;
      correct.push_back(mine);
      if (dense) drop.push_back(double((*dense)[size_t(i)] == r.label) - double(mine));
    }
    same += !dense || (*dense)[size_t(i)] == e.predicted[size_t(i)];
    e.density += density[size_t(i)];
    e.attention_flops += flops[size_t(i)];
  }
  if (n > 0) e.density /= double(n), e.attention_flops /= double(n);
  e.accuracy = e.labelled ? double(right) / double(e.labelled) : std::nan("");
  std::tie(e.accuracy_lo, e.accuracy_hi) = e.labelled ? bootstrap_ci(correct, 1000, 1234)
                                                      : std::pair{std::nan(""), std::nan("")};
  std::tie(e.drop_lo, e.drop_hi) =
      !drop.empty() ? bootstrap_ci(drop, 1000, 4321) : std::pair{std::nan(""), std::nan("")};
  e.agreement = n ? double(same) / double(n) : std::nan("");
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

TradeoffPoint dataset_point(const DatasetEval& e) {
  TradeoffPoint t;
  t.spec = e.spec;
  t.caption = variant_caption(e.spec);
  t.pattern = spec_pattern_id(e.spec);
  t.density = e.density;
  t.flops = e.attention_flops;
  t.rel_error = kNaN;  // no per-input comparison ran: only the dataset's numbers are drawn
  t.mass_recall = kNaN;
  t.accuracy = e.accuracy;
  t.accuracy_lo = e.accuracy_lo;
  t.accuracy_hi = e.accuracy_hi;
  return t;
}

}  // namespace attn::core
