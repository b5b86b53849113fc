#include "compute/vulkan/fallback.h"

#include "compute/error.h"

namespace attn {

Result run_with_fallback(const Variant& v, const Problem& p, Backend& preferred, Backend& fallback,
                         const RunOptions& opt, std::string* note) {
  std::string why;
  if (preferred.supports(v, p, &why)) {
    try {
      Result r = run(v, p, preferred, opt);
      if (note) note->clear();
      return r;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Device) throw;
      why = e.what();
    }
  }
  if (note)
    *note = preferred.name() + " could not run " + v.spec() + " (" + why + "); ran on " +
            fallback.name();
  return run(v, p, fallback, opt);
}

}  // namespace attn
