#include "render/heatmap_pipeline.h"

#include "compute/vulkan/vk_check.h"

namespace attn::render {
namespace {

const uint32_t kVertSpv[] =
#include "heatmap.vert.inc"
    ;
const uint32_t kFragSpv[] =
#include "heatmap.frag.inc"
    ;

VkShaderModule make_module(VkDevice dev, const uint32_t* code, size_t bytes) {
  VkShaderModuleCreateInfo ci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  ci.codeSize = bytes;
  ci.pCode = code;
  VkShaderModule m = VK_NULL_HANDLE;
  ATTN_VK_CHECK(vkCreateShaderModule(dev, &ci, nullptr, &m));
  return m;
}

VkSampler make_sampler(VkDevice dev, VkFilter filter) {
  VkSamplerCreateInfo sci{VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO};
  sci.magFilter = sci.minFilter = filter;
  sci.mipmapMode = VK_SAMPLER_MIPMAP_MODE_NEAREST;
  sci.addressModeU = sci.addressModeV = sci.addressModeW = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE;
  sci.maxLod = 0.f;
  VkSampler s = VK_NULL_HANDLE;
  ATTN_VK_CHECK(vkCreateSampler(dev, &sci, nullptr, &s));
  return s;
}

}  // namespace

HeatmapPipeline::HeatmapPipeline(const RenderTarget& t) : t_(t) {
  nearest_ = make_sampler(t.device, VK_FILTER_NEAREST);

  VkDescriptorSetLayoutBinding b[1] = {
      {0, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, VK_SHADER_STAGE_FRAGMENT_BIT, nullptr}};
  VkDescriptorSetLayoutCreateInfo dlci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dlci.bindingCount = 1;
  dlci.pBindings = b;
  ATTN_VK_CHECK(vkCreateDescriptorSetLayout(t.device, &dlci, nullptr, &dsl_));

  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 64};
  VkDescriptorPoolCreateInfo dpci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpci.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  dpci.maxSets = 32;
  dpci.poolSizeCount = 1;
  dpci.pPoolSizes = &ps;
  ATTN_VK_CHECK(vkCreateDescriptorPool(t.device, &dpci, nullptr, &pool_));

  VkPushConstantRange pcr{VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0,
                          sizeof(HeatmapPush)};
  VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &dsl_;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &pcr;
  ATTN_VK_CHECK(vkCreatePipelineLayout(t.device, &plci, nullptr, &layout_));

  VkShaderModule vs = make_module(t.device, kVertSpv, sizeof(kVertSpv));
  VkShaderModule fs = make_module(t.device, kFragSpv, sizeof(kFragSpv));
  VkPipelineShaderStageCreateInfo st[2] = {
      {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0, VK_SHADER_STAGE_VERTEX_BIT,
       vs, "main", nullptr},
      {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0,
       VK_SHADER_STAGE_FRAGMENT_BIT, fs, "main", nullptr}};
  VkPipelineVertexInputStateCreateInfo vi{
      VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO};
  VkPipelineInputAssemblyStateCreateInfo ia{
      VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO};
  ia.topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP;
  VkPipelineViewportStateCreateInfo vp{VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO};
  vp.viewportCount = 1;
  vp.scissorCount = 1;
  VkPipelineRasterizationStateCreateInfo rs{
      VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO};
  rs.polygonMode = VK_POLYGON_MODE_FILL;
  rs.cullMode = VK_CULL_MODE_NONE;
  rs.lineWidth = 1.f;
  VkPipelineMultisampleStateCreateInfo ms{VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO};
  ms.rasterizationSamples = t.samples;
  // The host's render pass may carry a depth attachment (QVulkanWindow's does): tests stay off.
  VkPipelineDepthStencilStateCreateInfo dss{
      VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO};
  VkPipelineColorBlendAttachmentState cba{};
  cba.colorWriteMask = 0xF;
  VkPipelineColorBlendStateCreateInfo cb{VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO};
  cb.attachmentCount = 1;
  cb.pAttachments = &cba;
  VkDynamicState dyn[] = {VK_DYNAMIC_STATE_VIEWPORT, VK_DYNAMIC_STATE_SCISSOR};
  VkPipelineDynamicStateCreateInfo ds{VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO};
  ds.dynamicStateCount = 2;
  ds.pDynamicStates = dyn;
  VkGraphicsPipelineCreateInfo gp{VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO};
  gp.stageCount = 2;
  gp.pStages = st;
  gp.pVertexInputState = &vi;
  gp.pInputAssemblyState = &ia;
  gp.pViewportState = &vp;
  gp.pRasterizationState = &rs;
  gp.pMultisampleState = &ms;
  gp.pDepthStencilState = &dss;
  gp.pColorBlendState = &cb;
  gp.pDynamicState = &ds;
  gp.layout = layout_;
  gp.renderPass = t.render_pass;
  gp.subpass = 0;
  const VkResult r =
      vkCreateGraphicsPipelines(t.device, VK_NULL_HANDLE, 1, &gp, nullptr, &pipeline_);
  vkDestroyShaderModule(t.device, vs, nullptr);
  vkDestroyShaderModule(t.device, fs, nullptr);
  ATTN_VK_CHECK(r);
}

HeatmapPipeline::~HeatmapPipeline() {
  vkDestroyPipeline(t_.device, pipeline_, nullptr);
  vkDestroyPipelineLayout(t_.device, layout_, nullptr);
  vkDestroyDescriptorPool(t_.device, pool_, nullptr);
  vkDestroyDescriptorSetLayout(t_.device, dsl_, nullptr);
  vkDestroySampler(t_.device, nearest_, nullptr);
}

VkDescriptorSet HeatmapPipeline::allocate_set() {
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &dsl_;
  VkDescriptorSet s = VK_NULL_HANDLE;
  ATTN_VK_CHECK(vkAllocateDescriptorSets(t_.device, &ai, &s));
  return s;
}

void HeatmapPipeline::free_set(VkDescriptorSet s) {
  if (s) vkFreeDescriptorSets(t_.device, pool_, 1, &s);
}

void HeatmapPipeline::write_set(VkDescriptorSet s, VkImageView cells) {
  VkDescriptorImageInfo ii{nearest_, cells, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL};
  VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
  w.dstSet = s;
  w.dstBinding = 0;
  w.descriptorCount = 1;
  w.descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
  w.pImageInfo = &ii;
  vkUpdateDescriptorSets(t_.device, 1, &w, 0, nullptr);
}

void HeatmapPipeline::draw(VkCommandBuffer cb, VkDescriptorSet s, const HeatmapPush& pc,
                           uint32_t fb_w, uint32_t fb_h) {
  VkViewport vp{0, 0, float(fb_w), float(fb_h), 0, 1};
  VkRect2D sc{{0, 0}, {fb_w, fb_h}};
  vkCmdSetViewport(cb, 0, 1, &vp);
  vkCmdSetScissor(cb, 0, 1, &sc);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline_);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_GRAPHICS, layout_, 0, 1, &s, 0, nullptr);
  vkCmdPushConstants(cb, layout_, VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0,
                     sizeof(pc), &pc);
  vkCmdDraw(cb, 4, 1, 0, 0);
}

}  // namespace attn::render
