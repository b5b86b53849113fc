#include "app/gui/shared_device.h"

#include "compute/vulkan/context.h"

namespace attn::gui {

std::shared_ptr<vk::Context> share_with_compute(const render::RenderTarget& t,
                                                std::recursive_mutex* queue_mutex) {
  auto ctx =
      vk::Context::adopt({t.instance, t.physical, t.device, t.queue, t.queue_family, queue_mutex});
  vk::set_shared_context(ctx);
  return ctx;
}

void stop_sharing(const std::shared_ptr<vk::Context>& ctx) {
  if (ctx && vk::shared_context().get() == ctx.get()) vk::set_shared_context(nullptr);
}

}  // namespace attn::gui
