// Running a variant on a preferred backend (e.g. "vulkan") with a clean fallback (e.g. "cpu"):
// used when the preferred one does not support the variant, has no device, or loses its device
// mid-run. The result's stats.backend records which backend actually ran.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compute/backend.h"

namespace attn {

// run(v, p, preferred) when preferred.supports(v, p); else, or when that run throws
// Error(Device), run(v, p, fallback). `note` (optional) receives why the fallback ran, or "".
// Other errors (bad input, cancellation) propagate unchanged.
Result run_with_fallback(const Variant& v, const Problem& p, Backend& preferred, Backend& fallback,
                         const RunOptions& opt = {}, std::string* note = nullptr);

// A backend that runs each variant on `preferred` when it can and on `fallback` otherwise (no
// support, no device, device lost): what the CLI and the app hand out for "vulkan". name() is
// the preferred one's; each result's stats.backend names the one that ran, and notes() lists
// why the fallback ran, once per distinct reason.
class FallbackBackend : public Backend {
 public:
  FallbackBackend(std::unique_ptr<Backend> preferred, std::unique_ptr<Backend> fallback);
  std::string name() const override { return preferred_->name(); }
  bool supports(const Variant& v, const Problem& p, std::string* why) const override;
  Result execute(const Variant& v, const Problem& p, const Layout& layout,
                 const RunOptions& opt) override;
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void note(const std::string& why);
  std::unique_ptr<Backend> preferred_, fallback_;
  std::vector<std::string> notes_;
};

// make_backend(name), wrapped in a FallbackBackend onto "cpu" unless name is "cpu" or
// "reference".
std::unique_ptr<Backend> make_backend_with_fallback(const std::string& name);

}  // namespace attn
