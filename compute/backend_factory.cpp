// Backends by name: the table behind make_backend() and backend_names() (declared in backend.h).
// A new backend is one entry here.
#include "compute/backend.h"
#include "compute/cpu/cpu_backend.h"
#include "compute/error.h"
#include "compute/reference/reference_backend.h"
#ifdef ATTN_HAVE_VULKAN
#include "compute/vulkan/vulkan_backend.h"
#endif

namespace attn {

namespace {

struct BackendEntry {
  const char* name;
  std::unique_ptr<Backend> (*make)();
};

// The reference first (the ground truth), then the fast ones.
const BackendEntry kBackends[] = {
    {"reference", [] { return make_reference_backend(); }},
    {"cpu", [] { return make_cpu_backend(); }},
#ifdef ATTN_HAVE_VULKAN
    {"vulkan", [] { return make_vulkan_backend(); }},  // the process-wide device context
#endif
};

}  // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  for (const BackendEntry& b : kBackends) out.push_back(b.name);
  return out;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  for (const BackendEntry& b : kBackends)
    if (name == b.name) return b.make();
  std::string known;
  for (const BackendEntry& b : kBackends)
    known += (known.empty() ? "" : ", ") + std::string(b.name);
  throw Error(ErrorCode::InvalidArgument, "unknown backend '" + name + "' (known: " + known + ")");
}

}  // namespace attn
