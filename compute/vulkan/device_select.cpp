#include "compute/vulkan/device_select.h"

#include <algorithm>
#include <cctype>

#include "compute/error.h"

namespace attn::vk {

namespace {

// Lower is better.
int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool usable(const DeviceCandidate& d) {
  return d.has_compute_queue && d.api_version >= VK_API_VERSION_1_1;
}

// Best usable device among those `accept` admits, or -1.
template <typename Pred>
int best(const std::vector<DeviceCandidate>& devices, Pred accept) {
  int pick = -1;
  for (int i = 0; i < int(devices.size()); ++i) {
    if (!usable(devices[i]) || !accept(devices[i])) continue;
    if (pick < 0 || type_rank(devices[i].type) < type_rank(devices[pick].type)) pick = i;
  }
  return pick;
}

}  // namespace

const char* device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

std::string describe_devices(const std::vector<DeviceCandidate>& devices) {
  if (devices.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(i) + ": " + devices[i].name + " (" + device_type_name(devices[i].type);
    if (!devices[i].has_compute_queue) s += ", no compute queue";
    if (devices[i].api_version < VK_API_VERSION_1_1) s += ", Vulkan < 1.1";
    s += ")";
  }
  return s;
}

int choose_device(const std::vector<DeviceCandidate>& devices, const std::string& request) {
  const std::string req = lower(request);
  int pick = -1;
  if (req.empty()) {
    pick = best(devices, [](const DeviceCandidate&) { return true; });
  } else if (std::all_of(req.begin(), req.end(), [](char c) { return std::isdigit(c); })) {
    int i = std::stoi(req);
    if (i < int(devices.size()) && usable(devices[i])) pick = i;
  } else if (req == "cpu" || req == "lavapipe" || req == "llvmpipe") {
    pick = best(devices, [](const DeviceCandidate& d) {
      return d.type == VK_PHYSICAL_DEVICE_TYPE_CPU ||
             lower(d.name).find("llvmpipe") != std::string::npos;
    });
  } else if (req == "gpu" || req == "discrete" || req == "integrated") {
    pick = best(devices, [&](const DeviceCandidate& d) {
      if (req == "discrete") return d.type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
      if (req == "integrated") return d.type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
      return d.type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
             d.type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
             d.type == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
    });
  } else {
    pick = best(devices, [&](const DeviceCandidate& d) {
      return lower(d.name).find(req) != std::string::npos;
    });
  }
  if (pick >= 0) return pick;
  if (req.empty())
    throw Error(ErrorCode::Device,
                "Vulkan: no usable device (needs Vulkan 1.1 and a compute queue); "
                "devices: " +
                    describe_devices(devices));
  throw Error(ErrorCode::Device, "Vulkan: device request '" + request +
                                     "' (ATTNSCOPE_VK_DEVICE or option) matches no usable device; "
                                     "devices: " +
                                     describe_devices(devices));
}

}  // namespace attn::vk
