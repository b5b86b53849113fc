// The pipeline that draws coloured attention cells as textured quads (shaders/heatmap.*), with
// its sampler, descriptor layout and pool. One descriptor set per panel texture.
#pragma once
#include <vulkan/vulkan.h>

#include "render/device.h"

namespace attn::render {

// Push constants, matching shaders/heatmap.{vert,frag}.
struct HeatmapPush {
  float rect[4];  // x0, y0, x1, y1 in normalised device coordinates
  float uv[4];    // u0, v0, u1, v1 of the cell texture
};

class HeatmapPipeline {
 public:
  explicit HeatmapPipeline(const RenderTarget& t);
  ~HeatmapPipeline();
  HeatmapPipeline(const HeatmapPipeline&) = delete;
  HeatmapPipeline& operator=(const HeatmapPipeline&) = delete;

  VkDescriptorSet allocate_set();
  void free_set(VkDescriptorSet s);
  // Points a set at a coloured cell texture (sampled nearest).
  void write_set(VkDescriptorSet s, VkImageView cells);
  // Draws one quad; viewport and scissor cover `fb_w` x `fb_h` pixels.
  void draw(VkCommandBuffer cb, VkDescriptorSet s, const HeatmapPush& pc, uint32_t fb_w,
            uint32_t fb_h);

 private:
  RenderTarget t_;
  VkSampler nearest_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout dsl_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

}  // namespace attn::render
