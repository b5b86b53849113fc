// A VkBuffer with its own memory. Device buffers are storage buffers the kernels read and write
// (mapped too when the device has unified memory); staging buffers are host-visible copies.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>

#include "compute/vulkan/vk_handle.h"

namespace attn::vk {

class Context;

class Buffer {
 public:
  enum class Kind { Device, Staging };
  // `bytes` is rounded up to a multiple of 16 (and at least 16): Vulkan forbids empty buffers.
  Buffer(const Context& ctx, size_t bytes, Kind kind);

  VkBuffer get() const { return buffer_.get(); }
  size_t size() const { return size_; }
  void* mapped() const { return mapped_; }  // null for device buffers on discrete GPUs

 private:
  size_t size_ = 0;
  UniqueMemory memory_;  // declared first so the buffer is destroyed before its memory
  UniqueBuffer buffer_;
  void* mapped_ = nullptr;
};

}  // namespace attn::vk
