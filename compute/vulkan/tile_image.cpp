#include "compute/vulkan/tile_image.h"

#include "compute/error.h"
#include "compute/vulkan/context.h"
#include "compute/vulkan/job.h"
#include "compute/vulkan/vk_check.h"

namespace attn::vk {

TileImage::TileImage(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {
  require(ctx_ != nullptr, ErrorCode::InvalidArgument, "TileImage: no Vulkan context");
}

void TileImage::ensure_size(int w, int h) {
  require(w > 0 && h > 0, ErrorCode::InvalidArgument, "TileImage: empty size");
  const auto& lim = ctx_->limits();
  require(uint32_t(w) <= lim.maxImageDimension2D && uint32_t(h) <= lim.maxImageDimension2D,
          ErrorCode::Unsupported,
          "TileImage: " + std::to_string(w) + " x " + std::to_string(h) +
              " exceeds the device's image size limit " + std::to_string(lim.maxImageDimension2D));
  if (w == w_ && h == h_ && image_) return;
  view_.reset();
  image_.reset();
  memory_.reset();
  written_ = false;
  VkDevice dev = ctx_->device();
  VkImageCreateInfo ici{VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO};
  ici.imageType = VK_IMAGE_TYPE_2D;
  ici.format = VK_FORMAT_R32_SFLOAT;
  ici.extent = {uint32_t(w), uint32_t(h), 1};
  ici.mipLevels = 1;
  ici.arrayLayers = 1;
  ici.samples = VK_SAMPLE_COUNT_1_BIT;
  ici.tiling = VK_IMAGE_TILING_OPTIMAL;
  ici.usage = VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT |
              VK_IMAGE_USAGE_TRANSFER_SRC_BIT;
  ici.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  ici.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  VkImage image;
  ATTN_VK_CHECK(vkCreateImage(dev, &ici, nullptr, &image));
  UniqueImage image_owner(dev, image);
  VkMemoryRequirements req;
  vkGetImageMemoryRequirements(dev, image, &req);
  int type = ctx_->memory_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) type = ctx_->memory_type(req.memoryTypeBits, 0);
  require(type >= 0, ErrorCode::Device, "TileImage: no memory type for an r32f image");
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = uint32_t(type);
  VkDeviceMemory mem;
  ATTN_VK_CHECK(vkAllocateMemory(dev, &mai, nullptr, &mem));
  memory_ = UniqueMemory(dev, mem);
  ATTN_VK_CHECK(vkBindImageMemory(dev, image, mem, 0));
  image_ = std::move(image_owner);

  VkImageViewCreateInfo vci{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
  vci.image = image;
  vci.viewType = VK_IMAGE_VIEW_TYPE_2D;
  vci.format = VK_FORMAT_R32_SFLOAT;
  vci.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  VkImageView view;
  ATTN_VK_CHECK(vkCreateImageView(dev, &vci, nullptr, &view));
  view_ = UniqueImageView(dev, view);
  w_ = w;
  h_ = h;
}

Tile TileImage::read_back() const {
  require(written_, ErrorCode::InvalidArgument, "TileImage: read_back before any tile was written");
  Tile t;
  t.w = w_;
  t.h = h_;
  t.cells.resize(size_t(w_) * h_);
  Job job(*ctx_);
  job.read_image(image_.get(), uint32_t(w_), uint32_t(h_), t.cells.data());
  job.run();
  return t;
}

}  // namespace attn::vk
