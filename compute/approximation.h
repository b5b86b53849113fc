// The approximation part of a variant: methods that change how attention is computed rather than
// which entries are kept (kernel/linear feature maps, low-rank projections, quantised Q/K, delta
// correction). Methods that do keep an explicit subset of entries (LSH buckets, k-means
// clusters, thresholds) are dynamic Patterns instead, so the sparse kernels run them for real.
// `attnscope variants` lists every approximation with its parameters and paper.
//
// How one runs (compute/backend.cpp run()):
//   - Kind::Replace (e.g. linear, nystrom): the approximation's own routine computes O in
//     O(N * features * d) or O(N * landmarks * d), never N x N. It stands alone: no pattern,
//     score modifier, normaliser or selective piece beside it. On the `reference` backend its
//     double-precision routine runs (the oracle of the same approximation, same seed); on any
//     other backend its threaded f32 routine.
//   - Kind::Wrap (e.g. quant_qk, delta): runs the variant's exact parts (pattern, modifiers,
//     normaliser) through the backend's own kernels on a changed problem (quantised Q and K) or
//     on extra rows (delta's dense queries), then combines.
// Either way the result's stats count what ran, and Result::approx keeps whatever the implied
// attention matrix needs (feature shifts, landmark kernels, the quantised problem), so that
// probability_block() and the tile query serve heatmaps, difference-from-dense and recall for
// approximations too, a block at a time (never N x N).
#pragma once
#include <chrono>
#include <functional>
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

// Factories, in compute/variants/approximations/ (a file per method or family), registered in
// compute/registry.cpp's table beside the patterns.
struct ApproximationFactory {
  VariantInfo (*info)();
  std::shared_ptr<const Approximation> (*make)(const Params& params);
};

extern const ApproximationFactory kLinearApprox;
extern const ApproximationFactory kPerformerApprox;
extern const ApproximationFactory kCosformerApprox;
extern const ApproximationFactory kNystromApprox;
extern const ApproximationFactory kQuantQkApprox;
extern const ApproximationFactory kFp8QkApprox;
extern const ApproximationFactory kDeltaApprox;
extern const ApproximationFactory kVqApprox;
extern const ApproximationFactory kLinformerApprox;

// An empty result shaped for p (o and row_stat zeroed, Dense layout, backend named).
Result approx_result(const Problem& p, const char* backend);

// For Replace approximations that only work bidirectionally: "" when p is not causal, else the
// refusal naming `id`, `why` (how its rows would see the future) and the kernels that can.
std::string refuse_causal(const Problem& p, const std::string& id, const std::string& why);

// The frame of a Replace approximation's run() whose heads are independent: an empty result
// for p on `path` (approx_result), head(h, r) for every head in parallel, Error(Cancelled)
// between heads once opt.cancel is set; then `state` in Result::approx, the counted cost
// a.predict(v, p, -1) and the kernel time since `t0`, when the run began.
Result run_heads(const Approximation& a, const Variant& v, const Problem& p, ApproxPath path,
                 const RunOptions& opt, std::chrono::steady_clock::time_point t0,
                 std::shared_ptr<const ApproxState> state,
                 const std::function<void(int h, Result& r)>& head);

// For Wrap approximations that change the problem before v's exact parts run (rounded Q/K,
// codebook keys): runs them on `changed` (run_exact) and keeps `changed` in Result::approx.
Result run_changed(const Variant& v, std::shared_ptr<const Problem> changed, Backend& backend,
                   const RunOptions& opt);
// The implied matrix of such a result: the exact probabilities of the changed problem.
void implied_changed(const Variant& v, const Result& r, int h, int i0, int i1, int k0, int k1,
                     std::vector<double>& out);

}  // namespace attn
