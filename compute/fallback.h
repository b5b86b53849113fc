// Running a variant on a preferred backend (e.g. "vulkan") with a clean fallback (e.g. "cpu"):
// used when the preferred one does not support the variant, has no device, or loses its device
// mid-run. The result's stats.backend records which backend actually ran. This is the one place
// that decides: the CLI, the app and the analysis core all run through a FallbackBackend.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compute/backend.h"

namespace attn {

// A backend that runs each variant on `preferred` when it can and on `fallback` otherwise (no
// support, no device, device lost): what the CLI and the app hand out for "vulkan". name() is
// the preferred one's; each result's stats.backend names the one that ran, and notes() lists
// why the fallback ran, once per distinct reason.
class FallbackBackend : public Backend {
 public:
  FallbackBackend(std::unique_ptr<Backend> preferred, std::unique_ptr<Backend> fallback);
  std::string name() const override { return preferred_->name(); }
  bool supports(const Variant& v, const Problem& p, std::string* why) const override;
  // The preferred backend's selection when it supports v (false on a device failure: the
  // fallback then selects and, via execute(), runs).
  bool select(const Variant& v, const Problem& p, Layout* layout, SelectStats* stats) override;
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
