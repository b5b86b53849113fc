// Move-only owner of one device-level Vulkan handle (buffer, pipeline, pool, ...), destroyed with
// its vkDestroy* function when the owner goes out of scope.
#pragma once
#include <vulkan/vulkan.h>

#include <utility>

namespace attn::vk {

template <typename T, void (*Destroy)(VkDevice, T, const VkAllocationCallbacks*)>
class Unique {
 public:
  Unique() = default;
  Unique(VkDevice device, T handle) : device_(device), handle_(handle) {}
  Unique(const Unique&) = delete;
  Unique& operator=(const Unique&) = delete;
  Unique(Unique&& o) noexcept { swap(o); }
  Unique& operator=(Unique&& o) noexcept {
    if (this != &o) {
      reset();
      swap(o);
    }
    return *this;
  }
  ~Unique() { reset(); }

  T get() const { return handle_; }
  explicit operator bool() const { return handle_ != VK_NULL_HANDLE; }
  void reset() {
    if (handle_ != VK_NULL_HANDLE) Destroy(device_, handle_, nullptr);
    handle_ = VK_NULL_HANDLE;
  }

 private:
  void swap(Unique& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(handle_, o.handle_);
  }
  VkDevice device_ = VK_NULL_HANDLE;
  T handle_ = VK_NULL_HANDLE;
};

using UniqueBuffer = Unique<VkBuffer, vkDestroyBuffer>;
using UniqueMemory = Unique<VkDeviceMemory, vkFreeMemory>;
using UniqueImage = Unique<VkImage, vkDestroyImage>;
using UniqueImageView = Unique<VkImageView, vkDestroyImageView>;
using UniqueShaderModule = Unique<VkShaderModule, vkDestroyShaderModule>;
using UniquePipeline = Unique<VkPipeline, vkDestroyPipeline>;
using UniquePipelineLayout = Unique<VkPipelineLayout, vkDestroyPipelineLayout>;
using UniqueDescriptorSetLayout = Unique<VkDescriptorSetLayout, vkDestroyDescriptorSetLayout>;
using UniqueDescriptorPool = Unique<VkDescriptorPool, vkDestroyDescriptorPool>;
using UniqueQueryPool = Unique<VkQueryPool, vkDestroyQueryPool>;
using UniqueFence = Unique<VkFence, vkDestroyFence>;
using UniqueCommandPool = Unique<VkCommandPool, vkDestroyCommandPool>;

}  // namespace attn::vk
