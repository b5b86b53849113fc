// A Vulkan device for compute, with no window code: created here (picking a device, see
// device_select.h) or adopted from the app so compute and rendering share one VkDevice.
// Owns the command pool, the pipeline cache and, when created here, the validation messenger.
#pragma once
#include <vulkan/vulkan.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compute/vulkan/vk_handle.h"

namespace attn::vk {

class PipelineCache;

struct ContextOptions {
  // Device request (see choose_device); empty = env ATTNSCOPE_VK_DEVICE, else the best device.
  std::string device;
  // 1 = Khronos validation layer on (when installed), 0 = off, -1 = env ATTNSCOPE_VK_VALIDATION,
  // else on in debug builds.
  int validation = -1;
};

// Handles of a device the app created; the context never destroys them.
struct AdoptedDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;  // must support compute
  uint32_t queue_family = 0;
  // Held around every submission when the app shares the queue. Recursive, because the app
  // holds it across its own event handling, which may nest.
  std::recursive_mutex* queue_mutex = nullptr;
};

class Context {
 public:
  // Throws Error(Device) with a message naming what is missing (loader, device, queue).
  static std::shared_ptr<Context> create(const ContextOptions& options = {});
  static std::shared_ptr<Context> adopt(const AdoptedDevice& adopted);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  uint32_t queue_family() const { return queue_family_; }
  const std::string& device_name() const { return device_name_; }
  VkPhysicalDeviceType device_type() const { return props_.deviceType; }
  bool is_cpu() const { return props_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU; }
  const VkPhysicalDeviceLimits& limits() const { return props_.limits; }
  uint32_t subgroup_size() const { return subgroup_size_; }
  // Device-local memory is also host visible and coherent (CPU and integrated devices): buffers
  // are mapped directly and no staging copies are made.
  bool unified_memory() const { return unified_memory_; }
  // True for a device adopted from the app (its renderer's), false for one created here.
  bool adopted() const { return !owns_device_; }
  bool has_timestamps() const { return timestamp_bits_ > 0; }
  double timestamp_period_ns() const { return props_.limits.timestampPeriod; }
  uint64_t timestamp_mask() const {
    return timestamp_bits_ >= 64 ? ~uint64_t(0) : (uint64_t(1) << timestamp_bits_) - 1;
  }

  // Memory type index with all of `want` among `type_bits`, or -1.
  int memory_type(uint32_t type_bits, VkMemoryPropertyFlags want) const;

  // Submits one recorded command buffer and waits for it. A lost device marks the context lost
  // and throws Error(Device).
  void submit_and_wait(VkCommandBuffer cmd);
  VkCommandBuffer allocate_command_buffer();
  void free_command_buffer(VkCommandBuffer cmd);

  // True after VK_ERROR_DEVICE_LOST: every later use fails fast, callers use the CPU.
  bool lost() const { return lost_.load(); }
  void mark_lost() { lost_.store(true); }

  // Validation layer (contexts created here only): whether it is on, and the errors it reported.
  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  int validation_errors() const { return validation_errors_.load(); }
  std::string validation_log() const;
  void clear_validation_log();

  PipelineCache& pipelines() { return *pipelines_; }

 private:
  Context();
  void init_device_info();
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(
      VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
      const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);

  bool owns_device_ = false;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  uint32_t timestamp_bits_ = 0;
  uint32_t subgroup_size_ = 1;
  bool unified_memory_ = false;
  std::string device_name_;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  std::recursive_mutex* queue_mutex_ = nullptr;  // the app's, when the queue is shared
  std::mutex own_mutex_;                         // guards the command pool and our submissions
  UniqueCommandPool pool_;
  std::atomic<bool> lost_{false};
  std::atomic<int> validation_errors_{0};
  mutable std::mutex log_mutex_;
  std::vector<std::string> log_;
  std::unique_ptr<PipelineCache> pipelines_;
};

// The process-wide context behind make_backend("vulkan"): the one installed with
// set_shared_context(), else created from the environment on first use. Null when no usable
// device exists; `why` then says why (the message is kept, creation is not retried).
std::shared_ptr<Context> shared_context(std::string* why = nullptr);
// Installs (or, with null, forgets) the shared context, e.g. one adopted from the renderer.
void set_shared_context(std::shared_ptr<Context> ctx);
// Forgets the shared context and any creation error, so the next use tries again.
void reset_shared_context();

}  // namespace attn::vk
