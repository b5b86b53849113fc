// Vulkan result checks for the renderer: a failed call throws attn::Error(Device) naming the call
// and its source line, so the host can report it and keep running.
#pragma once
#include <vulkan/vulkan.h>

namespace attn::render {

void vk_check(VkResult r, const char* call, const char* file, int line);

// Memory type index with every flag in `want` among `type_bits`; throws Error(Device) if none.
uint32_t find_memory_type(VkPhysicalDevice phys, uint32_t type_bits, VkMemoryPropertyFlags want);

}  // namespace attn::render

#define ATTN_RENDER_VK(call) ::attn::render::vk_check((call), #call, __FILE__, __LINE__)
