// One backend interface (ggml-backend style): the reference is the ground truth, `cpu` is the
// fast one, `vulkan` the GPU one. Callers ask supports() and fall back cleanly.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "compute/precision.h"
#include "compute/result.h"
#include "compute/variant.h"

namespace attn {

struct RunOptions {
  const std::atomic<bool>* cancel = nullptr;  // checked between tiles; throws Error(Cancelled)
  int threads = 0;                            // 0 = all hardware threads (or ATTNSCOPE_THREADS)
  // Storage of Q, K and V in the kernels (compute/precision.h): the cpu backend converts them
  // once per execute and reads 16-bit rows; backends that cannot run a precision run f32.
  // Result::stats.precision names what ran.
  Precision precision = Precision::F32;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // True when this backend can execute `v` on `p`; otherwise `why` says what is missing.
  virtual bool supports(const Variant& v, const Problem& p, std::string* why) const = 0;
  // Builds the kept set of `v` on `p` itself (e.g. scores and selection on the GPU) when it
  // accelerates v's selector (Pattern::describe), filling `stats` (flops as the pattern counts
  // them; seconds of the backend's own timing). Returns false to leave selection to v.select().
  // The layout equals v.select()'s up to float rounding of near-ties. Not called when the
  // run carries sequence state (see run_layers).
  virtual bool select(const Variant& v, const Problem& p, Layout* layout, SelectStats* stats) {
    (void)v, (void)p, (void)layout, (void)stats;
    return false;
  }
  // Executes `v` over an already-selected layout. Fills o, row_stat, counted cost, kernel time.
  virtual Result execute(const Variant& v, const Problem& p, const Layout& layout,
                         const RunOptions& opt) = 0;
  // execute() for a layout the caller has no further use for: a backend may move it into
  // Result::layout instead of copying it (index layouts run to hundreds of MiB). The default
  // copies.
  virtual Result execute_owned(const Variant& v, const Problem& p, Layout&& layout,
                               const RunOptions& opt) {
    return execute(v, p, layout, opt);
  }
};

// Backends by name, from the table in backend_factory.cpp.
// "reference" | "cpu" (| "vulkan" when built). Throws Error(InvalidArgument) listing known names.
std::unique_ptr<Backend> make_backend(const std::string& name);
// The names make_backend accepts, the reference first.
std::vector<std::string> backend_names();

// validate(p), select the layout (backend.select(), else v.select()), execute, and fill every
// stat (predicted cost, density, times). A variant with an approximation part runs that instead
// (compute/approximation.h): its f64 routine on the reference backend, its f32 one elsewhere;
// Error(Unsupported) when it cannot run p.
Result run(const Variant& v, const Problem& p, Backend& backend, const RunOptions& opt = {});

// run() of v's exact parts only (pattern, modifiers, normaliser), ignoring its approximation:
// what an approximation of Kind::Wrap runs on its changed problem.
Result run_exact(const Variant& v, const Problem& p, Backend& backend, const RunOptions& opt = {});

// run() for one layer of a forward pass that a model drives itself: `seq` is the state that
// v.pattern()->new_sequence_state() made for the pass (null when the pattern keeps none).
Result run(const Variant& v, const Problem& p, Backend& backend, SequenceState* seq,
           const RunOptions& opt = {});

// Runs the layers of one forward pass in order, sharing the pattern's sequence state
// (Sketch&Walk's walk accumulates across layers). problems[l] is layer l.
std::vector<Result> run_layers(const Variant& v, const std::vector<Problem>& problems,
                               Backend& backend, const RunOptions& opt = {});

}  // namespace attn
