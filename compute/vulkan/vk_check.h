// Every Vulkan call is checked at its call site: a failure throws attn::Error(Device) naming the
// call, the VkResult and the source line. Library code never exits on a Vulkan error. The
// compute backend and the renderer (render/) both check with ATTN_VK_CHECK.
#pragma once
#include <vulkan/vulkan.h>

#include <string>

namespace attn::vk {

// Readable name of a VkResult ("VK_ERROR_DEVICE_LOST").
const char* result_name(VkResult r);

// Throws Error(Device) for `call` failing with `r` at file:line; marks a lost device as such.
[[noreturn]] void throw_vk_error(VkResult r, const char* call, const char* file, int line);

}  // namespace attn::vk

#define ATTN_VK_CHECK(expr)                                              \
  do {                                                                   \
    VkResult attn_vk_r_ = (expr);                                        \
    if (attn_vk_r_ != VK_SUCCESS)                                        \
      ::attn::vk::throw_vk_error(attn_vk_r_, #expr, __FILE__, __LINE__); \
  } while (0)
