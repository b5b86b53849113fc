// The approximation part of a variant: methods that change how attention is computed rather than
// which entries are kept (kernel/linear feature maps, Nystrom, quantised Q/K, delta correction).
// Methods that do keep an explicit subset of entries (LSH buckets, k-means clusters, thresholds)
// are dynamic Patterns instead, so the sparse kernels run them for real.
//
// How one runs (compute/backend.cpp run()):
//   - Kind::Replace (linear, performer, cosformer, nystrom): the approximation's own routine
//     computes O in O(N * features * d) or O(N * landmarks * d), never N x N. It stands alone:
//     no pattern, score modifier, normaliser or selective piece beside it. On the `reference`
//     backend its double-precision routine runs (the oracle of the same approximation, same
//     seed); on any other backend its threaded f32 routine.
//   - Kind::Wrap (quant_qk, fp8_qk, delta): runs the variant's exact parts (pattern, modifiers,
//     normaliser) through the backend's own kernels on a changed problem (quantised Q and K) or
//     on extra rows (delta's dense queries), then combines.
// Either way the result's stats count what ran, and Result::approx keeps whatever the implied
// attention matrix needs (feature shifts, landmark kernels, the quantised problem), so that
// probability_block() and the tile query serve heatmaps, difference-from-dense and recall for
// approximations too, a block at a time (never N x N).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compute/params.h"
#include "compute/result.h"

namespace attn {

class Backend;
struct RunOptions;

// Which of an approximation's two routines runs.
enum class ApproxPath {
  Fast,       // f32, threaded, the cost the stats report
  Reference,  // f64, straightforward: the oracle (the reference backend runs this one)
};

class Approximation {
 public:
  enum class Kind { Replace, Wrap };
  virtual ~Approximation() = default;
  virtual VariantInfo info() const = 0;
  virtual Kind kind() const = 0;
  // Why it cannot run p ("" when it can), e.g. Nystrom on a causal problem.
  virtual std::string unsupported(const Problem& p) const {
    (void)p;
    return "";
  }
  // Runs `v` (whose approximation this is) on p. Wrap kinds run v's exact parts on `backend`
  // (run_exact in backend.h); Replace kinds ignore it. Fills o, row_stat, layout (the entries
  // that contribute: Dense for the kernel methods), approx, counted cost and kernel time.
  virtual Result run(const Variant& v, const Problem& p, Backend& backend, ApproxPath path,
                     const RunOptions& opt) const = 0;
  // Implied probabilities of queries [i0, i1) x keys [k0, k1) of head h for a result `r` of v
  // on p: out f64 [(i1 - i0), (k1 - k0)]. Work is O(rows x keys x features), memory the block.
  virtual void implied_block(const Variant& v, const Problem& p, const Result& r, int h, int i0,
                             int i1, int k0, int k1, std::vector<double>& out) const = 0;
  // Cost model (flops and bytes of the fast routine); `density` is the pattern's kept fraction
  // for Wrap kinds (< 0: not known ahead).
  virtual Cost predict(const Variant& v, const Problem& p, double density) const = 0;
};

// Factories, one file each in compute/variants/ (the registry lists them beside the patterns).
struct ApproximationFactory {
  VariantInfo (*info)();
  std::shared_ptr<const Approximation> (*make)(const Params& params);
};

extern const ApproximationFactory kLinearApprox;     // linear(feature=elu1|relu)
extern const ApproximationFactory kPerformerApprox;  // performer(features, seed)
extern const ApproximationFactory kCosformerApprox;  // cosformer
extern const ApproximationFactory kNystromApprox;    // nystrom(landmarks, pinv=exact|iterative)
extern const ApproximationFactory kQuantQkApprox;    // quant_qk(bits=8|4, smooth, block)
extern const ApproximationFactory kFp8QkApprox;      // fp8_qk(format=e4m3|e5m2)
extern const ApproximationFactory kDeltaApprox;      // delta(stride)
extern const ApproximationFactory kVqApprox;         // vq(codebook, iters, seed)
extern const ApproximationFactory kLinformerApprox;  // linformer(k, seed)

// An empty result shaped for p (o and row_stat zeroed, Dense layout, backend named).
Result approx_result(const Problem& p, const char* backend);

// For Wrap approximations that change the problem before v's exact parts run (rounded Q/K,
// codebook keys): runs them on `changed` (run_exact) and keeps `changed` in Result::approx.
Result run_changed(const Variant& v, std::shared_ptr<const Problem> changed, Backend& backend,
                   const RunOptions& opt);
// The implied matrix of such a result: the exact probabilities of the changed problem.
void implied_changed(const Variant& v, const Result& r, int h, int i0, int i1, int k0, int k1,
                     std::vector<double>& out);

}  // namespace attn
