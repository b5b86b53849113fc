// A variant = pattern (static mask or dynamic selector) x score modifiers x normaliser
// (FlexAttention-style composition), plus what the UI/CLI need: id, name, family, source
// paper, parameter schema and a cost model.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compute/layout.h"
#include "compute/params.h"
#include "compute/problem.h"
#include "compute/score_mod.h"

namespace attn {

struct VariantInfo {
  std::string id;            // stable id used in specs: "sinks_window"
  std::string display_name;  // "Sinks + window (StreamingLLM)"
  std::string family;        // "static", "dynamic", "score-mod", "normaliser", "dense"
  std::string source;        // paper: "Xiao et al. 2023, Efficient Streaming Language Models..."
  std::string description;   // one line
  std::vector<ParamSpec> params;
};

// Predicted or counted work.
struct Cost {
  double flops = 0;  // floating point operations (multiply and add count as 2)
  double bytes = 0;  // bytes moved to/from memory (Q, K, V, O at f32)
};

// Selector-side bookkeeping filled while building a layout.
struct SelectStats {
  double flops = 0;    // work spent deciding what to keep (pooling, sketches, estimates)
  double seconds = 0;  // wall time of the selection (GPU time when a backend selected)
};

// Typed identity of a pattern with its parameters, so that a backend can run the selectors it
// accelerates itself (Backend::select) without parsing specs. Patterns no backend accelerates
// keep Kind::Other.
struct PatternDescription {
  enum class Kind { Other, Topk, BlockTopk };
  Kind kind = Kind::Other;
  int k = 0;      // Topk: keys kept per query; BlockTopk: key blocks kept besides the current one
  int block = 0;  // BlockTopk: block length (queries and keys)
};

// State carried across the layers of one forward pass (Sketch&Walk accumulates its walk here).
struct SequenceState {
  virtual ~SequenceState() = default;
};

// The pattern part: produces the kept set of a problem.
class Pattern {
 public:
  virtual ~Pattern() = default;
  virtual VariantInfo info() const = 0;
  virtual bool dynamic() const = 0;  // depends on Q/K values (else on positions only)
  // Builds the kept set; `seq` is null for single problems, or the state shared by the layers of
  // one sequence run (see run_layers in backend.h).
  virtual Layout select(const Problem& p, SelectStats* stats, SequenceState* seq) const = 0;
  // Closed-form density (kept / visible entries) for static patterns; < 0 when not known ahead.
  virtual double predicted_density(const Problem& p) const { (void)p; return -1; }
  // Predicted flops of select() itself (pooling, sketches, estimates); 0 for static patterns.
  virtual double predicted_select_flops(const Problem& p) const { (void)p; return 0; }
  // The mask of a static pattern (null for dynamic ones).
  virtual std::shared_ptr<const Mask> mask() const { return nullptr; }
  virtual std::unique_ptr<SequenceState> new_sequence_state() const { return nullptr; }
  // Kind and parameters for backends that select on their own (see Backend::select).
  virtual PatternDescription describe() const { return {}; }
};

class Approximation;  // compute/approximation.h

class Variant {
 public:
  // `pattern` null = dense (every visible key). `approx` null = exact attention.
  Variant(std::string spec, std::shared_ptr<const Pattern> pattern, std::vector<ScoreMod> mods,
          Normaliser norm, bool selective = false,
          std::shared_ptr<const Approximation> approx = nullptr);

  // Canonical spec with every parameter spelled out: "sinks_window(sinks=4,window=256)+softcap(cap=30)".
  const std::string& spec() const { return spec_; }
  const Pattern* pattern() const { return pattern_.get(); }
  const std::vector<ScoreMod>& mods() const { return mods_; }
  const Normaliser& normaliser() const { return norm_; }
  // Selective attention (Leviathan et al. 2024): logits minus the accumulated ReLU'd logits that
  // earlier queries gave each key. Stateful along queries, so it has its own kernel.
  bool selective() const { return selective_; }
  bool dense_pattern() const { return pattern_ == nullptr; }
  // The approximation part (linear/kernel attention, Nystrom, quantised Q/K, delta correction),
  // or null. See compute/approximation.h for how it runs.
  const Approximation* approximation() const { return approx_.get(); }
  // This variant without its approximation part (what Wrap approximations run exactly).
  Variant exact_part() const;

  // Kept set for this problem (dense layout when there is no pattern).
  Layout select(const Problem& p, SelectStats* stats = nullptr, SequenceState* seq = nullptr) const;
  // Cost model: flops/bytes predicted from the pattern's closed-form density (or `density` when
  // given >= 0, e.g. a dynamic selector's target).
  Cost predict(const Problem& p, double density = -1) const;

 private:
  std::string spec_;
  std::shared_ptr<const Pattern> pattern_;
  std::vector<ScoreMod> mods_;
  Normaliser norm_;
  bool selective_ = false;
  std::shared_ptr<const Approximation> approx_;
};

}  // namespace attn
