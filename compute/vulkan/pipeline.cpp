#include "compute/vulkan/pipeline.h"

#include <cstring>

#include "compute/vulkan/vk_check.h"

namespace attn::vk {

SpecConstants& SpecConstants::set(uint32_t id, uint32_t value) {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].constantID == id) {
      data_[i] = value;
      return *this;
    }
  entries_.push_back({id, uint32_t(data_.size() * sizeof(uint32_t)), sizeof(uint32_t)});
  data_.push_back(value);
  return *this;
}

SpecConstants& SpecConstants::set_float(uint32_t id, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return set(id, bits);
}

std::string SpecConstants::key() const {
  std::string k;
  for (size_t i = 0; i < entries_.size(); ++i)
    k += std::to_string(entries_[i].constantID) + "=" + std::to_string(data_[i]) + ";";
  return k;
}

ComputePipeline::ComputePipeline(VkDevice device, const ShaderCode& code, uint32_t n_buffers,
                                 uint32_t push_bytes, const SpecConstants& spec)
    : name_(code.name), n_buffers_(n_buffers), push_bytes_(push_bytes) {
  std::vector<VkDescriptorSetLayoutBinding> bindings(n_buffers);
  for (uint32_t i = 0; i < n_buffers; ++i) {
    bindings[i] = {};
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dci.bindingCount = n_buffers;
  dci.pBindings = bindings.data();
  VkDescriptorSetLayout dsl;
  ATTN_VK_CHECK(vkCreateDescriptorSetLayout(device, &dci, nullptr, &dsl));
  set_layout_ = UniqueDescriptorSetLayout(device, dsl);

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo lci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  lci.setLayoutCount = 1;
  lci.pSetLayouts = &dsl;
  lci.pushConstantRangeCount = push_bytes ? 1 : 0;
  lci.pPushConstantRanges = &range;
  VkPipelineLayout layout;
  ATTN_VK_CHECK(vkCreatePipelineLayout(device, &lci, nullptr, &layout));
  layout_ = UniquePipelineLayout(device, layout);

  VkShaderModuleCreateInfo mci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mci.codeSize = code.bytes;
  mci.pCode = code.words;
  VkShaderModule module;
  ATTN_VK_CHECK(vkCreateShaderModule(device, &mci, nullptr, &module));
  UniqueShaderModule module_owner(device, module);

  VkSpecializationInfo si{};
  si.mapEntryCount = uint32_t(spec.entries().size());
  si.pMapEntries = spec.entries().data();
  si.dataSize = spec.data().size() * sizeof(uint32_t);
  si.pData = spec.data().data();
  VkComputePipelineCreateInfo cci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cci.stage.module = module;
  cci.stage.pName = "main";
  cci.stage.pSpecializationInfo = &si;
  cci.layout = layout;
  VkPipeline pipeline;
  ATTN_VK_CHECK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &cci, nullptr, &pipeline));
  pipeline_ = UniquePipeline(device, pipeline);
}

const ComputePipeline& PipelineCache::get(const ShaderCode& code, uint32_t n_buffers,
                                          uint32_t push_bytes, const SpecConstants& spec) {
  std::string key = std::string(code.name) + "|" + spec.key();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pipelines_.find(key);
  if (it == pipelines_.end())
    it = pipelines_
             .emplace(key,
                      std::make_unique<ComputePipeline>(device_, code, n_buffers, push_bytes, spec))
             .first;
  return *it->second;
}

size_t PipelineCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipelines_.size();
}

}  // namespace attn::vk
