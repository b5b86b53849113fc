// Dear ImGui 1.86 on the host's device and render pass: context, Vulkan backend, fonts.
// 1.86 specifics: the backend allocates from a descriptor pool we own, ImageCount must be at
// least the frames in flight, and the font texture is uploaded by a command buffer we submit.
#pragma once
#include <vulkan/vulkan.h>

#include <string>

#include "render/device.h"

struct ImFont;

namespace attn::render {

class ImGuiLayer {
 public:
  ImGuiLayer(const RenderTarget& t, const std::string& font_path, float size,
             float presentation_size);
  ~ImGuiLayer();
  ImGuiLayer(const ImGuiLayer&) = delete;
  ImGuiLayer& operator=(const ImGuiLayer&) = delete;

  ImFont* font(bool presentation) const { return presentation ? large_ : normal_; }
  void apply_theme(bool dark, bool presentation);

 private:
  RenderTarget t_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  ImFont* normal_ = nullptr;
  ImFont* large_ = nullptr;
  int theme_ = -1;
};

}  // namespace attn::render
