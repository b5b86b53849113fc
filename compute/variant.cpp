#include "compute/variant.h"

#include <algorithm>
#include <chrono>

#include "compute/approximation.h"

namespace attn {

Variant::Variant(std::string spec, std::shared_ptr<const Pattern> pattern,
                 std::vector<ScoreMod> mods, Normaliser norm, bool selective,
                 std::shared_ptr<const Approximation> approx)
    : spec_(std::move(spec)),
      pattern_(std::move(pattern)),
      mods_(std::move(mods)),
      norm_(norm),
      selective_(selective),
      approx_(std::move(approx)) {}

Variant Variant::exact_part() const {
  return Variant(spec_, pattern_, mods_, norm_, selective_);
}

Layout Variant::select(const Problem& p, SelectStats* stats, SequenceState* seq) const {
  auto t0 = std::chrono::steady_clock::now();
  SelectStats local;
  Layout l;  // Dense by default
  if (pattern_) l = pattern_->select(p, &local, seq);
  local.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats) *stats = local;
  return l;
}

// Cost model. Kept entries per head = density x visible entries; each costs a q.k dot and a p.v
// axpy: 4d flops (the normaliser's few flops per entry are ignored). Bytes: Q read and O written
// once, K and V read once per 64-query tile that keeps them (a tiled kernel's reuse), but never
// less than reading K and V once, all at f32.
Cost Variant::predict(const Problem& p, double density) const {
  if (approx_) return approx_->predict(*this, p, density);
  if (density < 0) density = pattern_ ? pattern_->predicted_density(p) : 1.0;
  if (density < 0 && pattern_ && !pattern_->dynamic()) {
    // Static pattern with explicit positions: count its (shared) kept set exactly.
    Layout l = pattern_->select(p, nullptr, nullptr);
    int64_t visible = visible_entries(p);
    density = visible > 0 ? double(layout_kept_entries(l, p, 0)) / double(visible) : 1.0;
  }
  if (density < 0) density = 1.0;  // a selector with no budget: the dense upper bound
  density = std::clamp(density, 0.0, 1.0);
  double kept = density * double(visible_entries(p)) * p.n_heads;
  Cost c;
  c.flops = 4.0 * p.d * kept + (pattern_ ? pattern_->predicted_select_flops(p) : 0.0);
  double q_o = 2.0 * p.n_heads * double(p.n_q) * p.d;
  double kv = 2.0 * p.d * std::max(double(p.n_kv_heads) * p.n_k, kept / 64.0);
  c.bytes = 4.0 * (q_o + kv);
  return c;
}

}  // namespace attn
