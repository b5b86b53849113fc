#include "compute/approximation.h"

#include "compute/backend.h"
#include "compute/cpu/huge_pages.h"
#include "compute/error.h"
#include "compute/layer_analysis.h"
#include "compute/parallel.h"
#include "compute/probabilities.h"

namespace attn {

Result approx_result(const Problem& p, const char* backend) {
  Result r;
  r.n_heads = p.n_heads;
  r.n_q = p.n_q;
  r.d = p.d;
  // Huge pages where the system has them, as the cpu kernels' outputs (no 4 KiB fault storm on
  // a long input).
  cpu::assign_huge(r.o, size_t(p.n_heads) * p.n_q * p.d, 0.0f);
  cpu::assign_huge(r.row_stat, size_t(p.n_heads) * p.n_q, 0.0f);
  r.layout.kind = Layout::Kind::Dense;
  r.stats.backend = backend;
  return r;
}

std::string refuse_causal(const Problem& p, const std::string& id, const std::string& why) {
  if (!p.causal) return "";
  return id + " is unsupported on causal problems (" + why +
         "); use it on a bidirectional model (BERT, ViT), or use linear, performer or cosformer";
}

Result run_heads(const Approximation& a, const Variant& v, const Problem& p, ApproxPath path,
                 const RunOptions& opt, std::chrono::steady_clock::time_point t0,
                 std::shared_ptr<const ApproxState> state,
                 const std::function<void(int h, Result& r)>& head) {
  Result r = approx_result(p, path == ApproxPath::Fast ? "cpu" : "reference");
  parallel_for(
      p.n_heads,
      [&](int h) {
        if (opt.cancel && opt.cancel->load()) throw Error(ErrorCode::Cancelled, "cancelled");
        head(h, r);
      },
      opt.threads);
  r.stats.counted = a.predict(v, p, -1);
  r.stats.kernel_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.approx = std::move(state);
  return r;
}

namespace {

struct ChangedProblem final : ApproxState {
  std::shared_ptr<const Problem> problem;  // what the kernels read

  std::shared_ptr<const ApproxState> head(int h) const override {
    auto s = std::make_shared<ChangedProblem>();
    s->problem = std::make_shared<Problem>(head_problem(*problem, h));
    return s;
  }
};

}  // namespace

Result run_changed(const Variant& v, std::shared_ptr<const Problem> changed, Backend& backend,
                   const RunOptions& opt) {
  Result r = run_exact(v, *changed, backend, opt);
  auto state = std::make_shared<ChangedProblem>();
  state->problem = std::move(changed);
  r.approx = state;
  return r;
}

void implied_changed(const Variant& v, const Result& r, int h, int i0, int i1, int k0, int k1,
                     std::vector<double>& out) {
  const auto* state = dynamic_cast<const ChangedProblem*>(r.approx.get());
  require(state != nullptr, ErrorCode::InvalidArgument,
          v.spec() + ": the result carries no changed problem (was it run by this variant?)");
  probability_block(v.exact_part(), *state->problem, r, h, i0, i1, k0, k1, out);
}

}  // namespace attn
