#include "compute/vulkan/buffer.h"

#include "compute/error.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/vk_check.h"

namespace attn::vk {

Buffer::Buffer(const Context& ctx, size_t bytes, Kind kind) {
  size_ = bytes < 16 ? 16 : (bytes + 15) / 16 * 16;
  VkDevice dev = ctx.device();
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = size_;
  bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (kind == Kind::Device) bci.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buf;
  ATTN_VK_CHECK(vkCreateBuffer(dev, &bci, nullptr, &buf));
  buffer_ = UniqueBuffer(dev, buf);

  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, buf, &req);
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = -1;
  bool map = false;
  if (kind == Kind::Staging) {
    type = ctx.memory_type(req.memoryTypeBits, host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (type < 0) type = ctx.memory_type(req.memoryTypeBits, host);
    map = true;
  } else if (ctx.unified_memory()) {
    type = ctx.memory_type(req.memoryTypeBits, host | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    map = type >= 0;
  }
  if (type < 0 && kind == Kind::Device)
    type = ctx.memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0)
    throw Error(ErrorCode::Device, "Vulkan: no memory type for a " + std::to_string(size_) +
                                       "-byte " + (kind == Kind::Device ? "device" : "staging") +
                                       " buffer on " + ctx.device_name());
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = uint32_t(type);
  VkDeviceMemory mem;
  ATTN_VK_CHECK(vkAllocateMemory(dev, &mai, nullptr, &mem));
  memory_ = UniqueMemory(dev, mem);
  ATTN_VK_CHECK(vkBindBufferMemory(dev, buf, mem, 0));
  if (map) ATTN_VK_CHECK(vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, &mapped_));
}

}  // namespace attn::vk
