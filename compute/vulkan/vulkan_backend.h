// The "vulkan" backend: every variant whose pattern is a layout (dense, static masks, block and
// index selectors) with any score modifiers and normaliser runs on the GPU. Selective attention
// (sequential along queries) is not supported: supports() says so and callers use the CPU (see
// fallback.h). Without a usable device, or after a lost one, supports() is false with the reason.
#pragma once
#include <memory>

#include "compute/backend.h"

namespace attn {

namespace vk {
class Context;
}

// A backend on `ctx`, or on the shared context (vk::shared_context()) when null. Never throws for
// a missing device: supports() then reports why.
std::unique_ptr<Backend> make_vulkan_backend(std::shared_ptr<vk::Context> ctx = nullptr);

}  // namespace attn
