// The Vulkan objects the host lends the renderer: a device, a graphics queue and the render pass
// the renderer draws in (subpass 0). The renderer never creates or destroys these.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>

namespace attn::render {

struct RenderTarget {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;  // graphics queue
  uint32_t queue_family = 0;
  VkRenderPass render_pass = VK_NULL_HANDLE;
  VkSampleCountFlagBits samples = VK_SAMPLE_COUNT_1_BIT;
  int frames_in_flight = 2;  // command buffers the host rotates through (its "slots")
};

}  // namespace attn::render
