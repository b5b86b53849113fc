// An r32f image holding one tile of pooled probabilities, for the renderer to sample (it is left
// in SHADER_READ_ONLY_OPTIMAL layout), with a host read-back for tests and export.
#pragma once
#include <vulkan/vulkan.h>

#include <memory>

#include "compute/probabilities.h"
#include "compute/vulkan/vk_handle.h"

namespace attn::vk {

class Context;

class TileImage {
 public:
  explicit TileImage(std::shared_ptr<Context> ctx);

  // (Re)creates the image when its size differs; the contents are undefined until written.
  void ensure_size(int w, int h);
  int width() const { return w_; }
  int height() const { return h_; }
  VkImage image() const { return image_.get(); }
  VkImageView view() const { return view_.get(); }
  VkFormat format() const { return VK_FORMAT_R32_SFLOAT; }
  // True once a tile query has written it (and it is in SHADER_READ_ONLY_OPTIMAL layout).
  bool written() const { return written_; }
  void mark_written() { written_ = true; }

  // Copies the image to the host: cells f32 [h, w].
  Tile read_back() const;

 private:
  std::shared_ptr<Context> ctx_;
  int w_ = 0, h_ = 0;
  bool written_ = false;
  UniqueMemory memory_;  // declared first: the image and its view go before the memory
  UniqueImage image_;
  UniqueImageView view_;
};

}  // namespace attn::vk
