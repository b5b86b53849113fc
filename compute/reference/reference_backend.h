// The ground truth: straightforward per-row attention in double precision over the kept keys of
// the layout (masking is allowed here and only here). Slow by design; every other backend is
// compared against it.
#pragma once
#include <memory>

#include "compute/backend.h"

namespace attn {

std::unique_ptr<Backend> make_reference_backend();

}  // namespace attn
