// A 2D image sampled by the heatmap shader, written by copies recorded into the host's frame
// command buffer from a per-slot staging buffer (a slot's buffer is free again once the host has
// waited for that slot's previous frame). Grows on demand; never shrinks.
#pragma once
#include <vulkan/vulkan.h>

#include <vector>

#include "render/device.h"

namespace attn::render {

class SampledImage {
 public:
  // `exact`: allocate exactly the uploaded size (lookup tables); else grow in steps of 256.
  SampledImage(const RenderTarget& t, VkFormat format, int texel_bytes, bool exact = false);
  ~SampledImage();
  SampledImage(const SampledImage&) = delete;
  SampledImage& operator=(const SampledImage&) = delete;

  // Copies w x h texels (row-major, tightly packed) into the staging buffer of `slot` and records
  // the transfer into `cb` (outside any render pass). Returns true when the image had to be
  // recreated larger, so descriptor sets that point at view() must be rewritten.
  bool upload(VkCommandBuffer cb, int slot, const void* texels, int w, int h);

  VkImageView view() const { return view_; }
  int capacity_w() const { return cap_w_; }
  int capacity_h() const { return cap_h_; }
  bool has_content() const { return written_; }

 private:
  struct Staging {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* mapped = nullptr;
    size_t bytes = 0;
  };
  void create_image(int w, int h);
  void destroy_image();
  void ensure_staging(Staging& s, size_t bytes);
  void destroy_staging(Staging& s);

  RenderTarget t_;
  VkFormat format_;
  int texel_bytes_;
  bool exact_;
  int cap_w_ = 0, cap_h_ = 0;
  bool written_ = false;
  VkImage image_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkImageView view_ = VK_NULL_HANDLE;
  std::vector<Staging> staging_;  // [frames_in_flight]
};

}  // namespace attn::render
