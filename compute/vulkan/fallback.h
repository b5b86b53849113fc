// Running a variant on a preferred backend (e.g. "vulkan") with a clean fallback (e.g. "cpu"):
// used when the preferred one does not support the variant, has no device, or loses its device
// mid-run. The result's stats.backend records which backend actually ran.
#pragma once
#include <string>

#include "compute/backend.h"

namespace attn {

// run(v, p, preferred) when preferred.supports(v, p); else, or when that run throws
// Error(Device), run(v, p, fallback). `note` (optional) receives why the fallback ran, or "".
// Other errors (bad input, cancellation) propagate unchanged.
Result run_with_fallback(const Variant& v, const Problem& p, Backend& preferred, Backend& fallback,
                         const RunOptions& opt = {}, std::string* note = nullptr);

}  // namespace attn
