// The view's Vulkan device handed to compute (no Qt here: Qt's headers hide Vulkan's
// prototypes, which compute's Vulkan code calls directly).
#pragma once
#include <memory>
#include <mutex>

#include "render/device.h"

namespace attn::vk {
class Context;
}

namespace attn::gui {

// Adopts the renderer's device as the process-wide compute context (what the vulkan backend and
// the Vulkan tile query use). `queue_mutex` is held by the view while Qt uses the queue.
// Throws attn::Error when the device cannot serve compute.
std::shared_ptr<vk::Context> share_with_compute(const render::RenderTarget& t,
                                                std::recursive_mutex* queue_mutex);
// Forgets `ctx` as the process-wide context (before the view destroys its device).
void stop_sharing(const std::shared_ptr<vk::Context>& ctx);

}  // namespace attn::gui
