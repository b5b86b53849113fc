#include "render/vk_check.h"

#include <string>

#include "compute/error.h"

namespace attn::render {

void vk_check(VkResult r, const char* call, const char* file, int line) {
  if (r == VK_SUCCESS) return;
  throw Error(ErrorCode::Device, std::string("renderer: ") + call + " failed with VkResult " +
                                     std::to_string(int(r)) + " at " + file + ":" +
                                     std::to_string(line));
}

uint32_t find_memory_type(VkPhysicalDevice phys, uint32_t type_bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(phys, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
    if ((type_bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
  throw Error(ErrorCode::Device, "renderer: no Vulkan memory type with flags " +
                                     std::to_string(want) + " for type bits " +
                                     std::to_string(type_bits));
}

}  // namespace attn::render
