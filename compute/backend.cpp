#include "compute/backend.h"

#include <algorithm>
#include <chrono>

#include "compute/approximation.h"
#include "compute/error.h"
#include "compute/parallel.h"

namespace attn {

namespace {

// Kept entries and density from the executed layout, and the predicted cost.
void count_kept(const Variant& v, const Problem& p, Result& r) {
  // A layout with one entry for every head (dense, static patterns) keeps the same count in each:
  // counted once (a partial block asks the mask entry by entry).
  const Layout& l = r.layout;
  const bool shared = l.kind == Layout::Kind::Dense ||
                      (l.kind == Layout::Kind::Blocks && l.blocks.size() == 1) ||
                      (l.kind == Layout::Kind::Indices && l.indices.size() == 1) ||
                      (l.kind == Layout::Kind::Lines && l.lines.size() == 1);
  const int counted = shared ? std::min(p.n_heads, 1) : p.n_heads;
  std::vector<int64_t> kept_per_head(size_t(counted), 0);
  parallel_for(counted, [&](int h) { kept_per_head[size_t(h)] = layout_kept_entries(l, p, h); });
  int64_t kept = 0;
  for (int64_t k : kept_per_head) kept += shared ? k * p.n_heads : k;
  int64_t visible = visible_entries(p) * p.n_heads;
  r.stats.kept_entries = kept;
  r.stats.density = visible > 0 ? double(kept) / double(visible) : 0.0;
  const bool dynamic = v.pattern() && v.pattern()->dynamic();
  r.stats.predicted = v.predict(p, dynamic || v.approximation() ? r.stats.density : -1);
}

Result run_one(const Variant& v, const Problem& p, Backend& backend, const RunOptions& opt,
               SequenceState* seq) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  validate(p);
  if (const Approximation* a = v.approximation()) {
    const std::string why = a->unsupported(p);
    if (!why.empty()) throw Error(ErrorCode::Unsupported, v.spec() + ": " + why);
    const ApproxPath path =
        backend.name() == "reference" ? ApproxPath::Reference : ApproxPath::Fast;
    Result r = a->run(v, p, backend, path, opt);
    count_kept(v, p, r);
    r.stats.wall_seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return r;
  }
  std::string why;
  if (!backend.supports(v, p, &why))
    throw Error(ErrorCode::Unsupported,
                backend.name() + " cannot run " + v.spec() + (why.empty() ? "" : ": " + why));
  SelectStats sel;
  Layout layout;
  // A pattern carrying sequence state (seq non-null) always selects itself.
  if (seq || !backend.select(v, p, &layout, &sel)) layout = v.select(p, &sel, seq);
  Result r = backend.execute_owned(v, p, std::move(layout), opt);
  count_kept(v, p, r);
  r.stats.counted.flops += sel.flops;
  r.stats.select_seconds = sel.seconds;
  r.stats.wall_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return r;
}

}  // namespace

Result run(const Variant& v, const Problem& p, Backend& backend, const RunOptions& opt) {
  return run_one(v, p, backend, opt, nullptr);
}

Result run_exact(const Variant& v, const Problem& p, Backend& backend, const RunOptions& opt) {
  return run_one(v.exact_part(), p, backend, opt, nullptr);
}

Result run(const Variant& v, const Problem& p, Backend& backend, SequenceState* seq,
           const RunOptions& opt) {
  return run_one(v, p, backend, opt, seq);
}

std::vector<Result> run_layers(const Variant& v, const std::vector<Problem>& problems,
                               Backend& backend, const RunOptions& opt) {
  std::unique_ptr<SequenceState> seq = v.pattern() ? v.pattern()->new_sequence_state() : nullptr;
  std::vector<Result> out;
  out.reserve(problems.size());
  for (const Problem& p : problems) out.push_back(run_one(v, p, backend, opt, seq.get()));
  return out;
}

}  // namespace attn
