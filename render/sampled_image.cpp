#include "render/sampled_image.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "compute/error.h"
#include "compute/vulkan/vk_check.h"

namespace attn::render {
namespace {

// Memory type index with every flag in `want` among `type_bits`; throws Error(Device) if none.
uint32_t find_memory_type(VkPhysicalDevice phys, uint32_t type_bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(phys, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i)
    if ((type_bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
  throw Error(ErrorCode::Device, "renderer: no Vulkan memory type with flags " +
                                     std::to_string(want) + " for type bits " +
                                     std::to_string(type_bits));
}

}  // namespace

SampledImage::SampledImage(const RenderTarget& t, VkFormat format, int texel_bytes, bool exact)
    : t_(t),
      format_(format),
      texel_bytes_(texel_bytes),
      exact_(exact),
      staging_(size_t(t.frames_in_flight)) {}

SampledImage::~SampledImage() {
  destroy_image();
  for (Staging& s : staging_) destroy_staging(s);
}

void SampledImage::create_image(int w, int h) {
  VkImageCreateInfo ici{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
  ici.imageType = VK_IMAGE_TYPE_2D;
  ici.format = format_;
  ici.extent = {uint32_t(w), uint32_t(h), 1};
  ici.mipLevels = 1;
  ici.arrayLayers = 1;
  ici.samples = VK_SAMPLE_COUNT_1_BIT;
  ici.tiling = VK_IMAGE_TILING_OPTIMAL;
  ici.usage = VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT;
  ici.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  ATTN_VK_CHECK(vkCreateImage(t_.device, &ici, nullptr, &image_));
  VkMemoryRequirements req;
  vkGetImageMemoryRequirements(t_.device, image_, &req);
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex =
      find_memory_type(t_.physical, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  ATTN_VK_CHECK(vkAllocateMemory(t_.device, &mai, nullptr, &memory_));
  ATTN_VK_CHECK(vkBindImageMemory(t_.device, image_, memory_, 0));
  VkImageViewCreateInfo vci{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
  vci.image = image_;
  vci.viewType = VK_IMAGE_VIEW_TYPE_2D;
  vci.format = format_;
  vci.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  ATTN_VK_CHECK(vkCreateImageView(t_.device, &vci, nullptr, &view_));
  cap_w_ = w;
  cap_h_ = h;
  written_ = false;
}

void SampledImage::destroy_image() {
  if (view_) vkDestroyImageView(t_.device, view_, nullptr);
  if (image_) vkDestroyImage(t_.device, image_, nullptr);
  if (memory_) vkFreeMemory(t_.device, memory_, nullptr);
  view_ = VK_NULL_HANDLE;
  image_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  cap_w_ = cap_h_ = 0;
}

void SampledImage::ensure_staging(Staging& s, size_t bytes) {
  if (s.bytes >= bytes) return;
  destroy_staging(s);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
  ATTN_VK_CHECK(vkCreateBuffer(t_.device, &bci, nullptr, &s.buffer));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(t_.device, s.buffer, &req);
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex =
      find_memory_type(t_.physical, req.memoryTypeBits,
                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  ATTN_VK_CHECK(vkAllocateMemory(t_.device, &mai, nullptr, &s.memory));
  ATTN_VK_CHECK(vkBindBufferMemory(t_.device, s.buffer, s.memory, 0));
  ATTN_VK_CHECK(vkMapMemory(t_.device, s.memory, 0, VK_WHOLE_SIZE, 0, &s.mapped));
  s.bytes = bytes;
}

void SampledImage::destroy_staging(Staging& s) {
  if (s.buffer) vkDestroyBuffer(t_.device, s.buffer, nullptr);
  if (s.memory) vkFreeMemory(t_.device, s.memory, nullptr);
  s = Staging{};
}

bool SampledImage::upload(VkCommandBuffer cb, int slot, const void* texels, int w, int h) {
  require(w > 0 && h > 0 && slot >= 0 && slot < int(staging_.size()), ErrorCode::InvalidArgument,
          "renderer: bad texture upload " + std::to_string(w) + "x" + std::to_string(h));
  bool recreated = false;
  if (w > cap_w_ || h > cap_h_) {
    // Earlier frames may still sample the old image: wait before replacing it (rare: growth only).
    vkDeviceWaitIdle(t_.device);
    const int nw = exact_ ? w : std::max(cap_w_, (w + 255) / 256 * 256);
    const int nh = exact_ ? h : std::max(cap_h_, (h + 255) / 256 * 256);
    destroy_image();
    create_image(nw, nh);
    recreated = true;
  }
  const size_t bytes = size_t(w) * size_t(h) * size_t(texel_bytes_);
  Staging& s = staging_[size_t(slot)];
  ensure_staging(s, bytes);
  std::memcpy(s.mapped, texels, bytes);

  VkImageMemoryBarrier b{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
  b.oldLayout = written_ ? VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL : VK_IMAGE_LAYOUT_UNDEFINED;
  b.newLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
  b.srcAccessMask = written_ ? VK_ACCESS_SHADER_READ_BIT : 0;
  b.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  b.srcQueueFamilyIndex = b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  b.image = image_;
  b.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  vkCmdPipelineBarrier(cb,
                       VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT | VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, nullptr, 0, nullptr, 1, &b);
  VkBufferImageCopy r{};
  r.bufferRowLength = uint32_t(w);
  r.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
  r.imageExtent = {uint32_t(w), uint32_t(h), 1};
  vkCmdCopyBufferToImage(cb, s.buffer, image_, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, &r);
  b.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
  b.newLayout = VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL;
  b.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, 0,
                       0, nullptr, 0, nullptr, 1, &b);
  written_ = true;
  return recreated;
}

}  // namespace attn::render
