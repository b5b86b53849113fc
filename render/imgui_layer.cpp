#include "render/imgui_layer.h"

#include <backends/imgui_impl_vulkan.h>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "compute/error.h"
#include "compute/vulkan/vk_check.h"

namespace attn::render {
namespace {

void imgui_vk_result(VkResult r) {
  if (r != VK_SUCCESS)
    std::fprintf(stderr, "attnscope: ImGui Vulkan backend: %s\n", vk::result_name(r));
}

}  // namespace

ImGuiLayer::ImGuiLayer(const RenderTarget& t, const std::string& font_path, float size,
                       float presentation_size)
    : t_(t) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the host persists layout; ImGui writes nothing
  std::error_code ec;
  // Latin-1, then the punctuation and arrows labels use ("…", "−", "↵" for a
  // newline token): glyphs the file lacks fall back, and visible_label() checks before using one.
  static const ImWchar kRanges[] = {0x0020, 0x00FF, 0x2010, 0x2027, 0x2190,
                                    0x21FF, 0x2212, 0x2212, 0};
  if (!font_path.empty() && std::filesystem::exists(font_path, ec)) {
    normal_ = io.Fonts->AddFontFromFileTTF(font_path.c_str(), size, nullptr, kRanges);
    large_ = io.Fonts->AddFontFromFileTTF(font_path.c_str(), presentation_size, nullptr, kRanges);
  }
  if (!normal_ || !large_) {
    io.Fonts->Clear();
    ImFontConfig c;
    c.SizePixels = 13;
    normal_ = io.Fonts->AddFontDefault(&c);
    c.SizePixels = 26;
    large_ = io.Fonts->AddFontDefault(&c);
  }

  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 8};
  VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pci.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pci.maxSets = 8;
  pci.poolSizeCount = 1;
  pci.pPoolSizes = &ps;
  ATTN_VK_CHECK(vkCreateDescriptorPool(t.device, &pci, nullptr, &pool_));

  ImGui_ImplVulkan_InitInfo ii{};
  ii.Instance = t.instance;
  ii.PhysicalDevice = t.physical;
  ii.Device = t.device;
  ii.QueueFamily = t.queue_family;
  ii.Queue = t.queue;
  ii.DescriptorPool = pool_;
  ii.Subpass = 0;
  ii.MinImageCount = uint32_t(std::max(2, t.frames_in_flight));
  ii.ImageCount = ii.MinImageCount;
  ii.MSAASamples = t.samples;
  ii.CheckVkResultFn = imgui_vk_result;
  require(ImGui_ImplVulkan_Init(&ii, t.render_pass), ErrorCode::Device,
          "renderer: ImGui_ImplVulkan_Init failed");

  // Upload the font atlas once with a command buffer of our own.
  VkCommandPoolCreateInfo cpci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpci.queueFamilyIndex = t.queue_family;
  ATTN_VK_CHECK(vkCreateCommandPool(t.device, &cpci, nullptr, &cmd_pool_));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = cmd_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  ATTN_VK_CHECK(vkAllocateCommandBuffers(t.device, &ai, &cb));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  ATTN_VK_CHECK(vkBeginCommandBuffer(cb, &bi));
  ImGui_ImplVulkan_CreateFontsTexture(cb);
  ATTN_VK_CHECK(vkEndCommandBuffer(cb));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  ATTN_VK_CHECK(vkQueueSubmit(t.queue, 1, &si, VK_NULL_HANDLE));
  ATTN_VK_CHECK(vkQueueWaitIdle(t.queue));
  vkFreeCommandBuffers(t.device, cmd_pool_, 1, &cb);
  ImGui_ImplVulkan_DestroyFontUploadObjects();
  apply_theme(true, false);
}

ImGuiLayer::~ImGuiLayer() {
  vkDeviceWaitIdle(t_.device);
  ImGui_ImplVulkan_Shutdown();
  ImGui::DestroyContext();
  vkDestroyCommandPool(t_.device, cmd_pool_, nullptr);
  vkDestroyDescriptorPool(t_.device, pool_, nullptr);
}

void ImGuiLayer::apply_theme(bool dark, bool presentation) {
  const int theme = (dark ? 1 : 0) | (presentation ? 2 : 0);
  if (theme == theme_) return;
  theme_ = theme;
  ImGuiStyle style;
  if (dark)
    ImGui::StyleColorsDark(&style);
  else
    ImGui::StyleColorsLight(&style);
  // Dim texts (legends, captions, ticks) at 4.5:1 or more against the canvas's clear colour
  // (ImGui's own greys are 4.4:1 on dark and 2.5:1 on light).
  style.Colors[ImGuiCol_TextDisabled] =
      dark ? ImVec4(0.58f, 0.58f, 0.58f, 1) : ImVec4(0.38f, 0.38f, 0.38f, 1);
  style.WindowRounding = 4;
  style.FrameRounding = 3;
  style.GrabRounding = 3;
  style.WindowBorderSize = 1;
  style.FramePadding = ImVec2(6, 3);
  style.ItemSpacing = ImVec2(8, 5);
  if (presentation) style.ScaleAllSizes(1.5f);
  ImGui::GetStyle() = style;
  ImGui::GetIO().FontDefault = font(presentation);
}

}  // namespace attn::render
