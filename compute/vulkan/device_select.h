// Which physical device the Vulkan backend uses: discrete GPU first, then integrated, then
// virtual, then CPU (lavapipe); or the one a request names (ATTNSCOPE_VK_DEVICE).
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::vk {

struct DeviceCandidate {
  std::string name;  // VkPhysicalDeviceProperties::deviceName
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t api_version = 0;
  bool has_compute_queue = false;
};

// Index of the device to use. `request` empty = best by type; a number = that index; "cpu",
// "lavapipe", "gpu", "discrete", "integrated" = best of that kind; else a case-insensitive
// substring of the name. Throws Error(Device) listing the devices when nothing usable matches.
int choose_device(const std::vector<DeviceCandidate>& devices, const std::string& request);

// "0: NVIDIA H200 (discrete GPU), 1: llvmpipe (CPU)" for messages.
std::string describe_devices(const std::vector<DeviceCandidate>& devices);

const char* device_type_name(VkPhysicalDeviceType type);

}  // namespace attn::vk
