// Compute pipelines: one embedded SPIR-V module specialised with constants (head dimension, tile
// sizes, normaliser, score modifiers), all bindings storage buffers, one push-constant block.
// Pipelines are built once per distinct specialisation and cached for the context's lifetime.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compute/vulkan/vk_handle.h"

namespace attn::vk {

// SPIR-V of one shader, embedded at build time (see shaders.h).
struct ShaderCode {
  const char* name;
  const uint32_t* words;
  size_t bytes;
};

// 32-bit specialisation constants by constant_id.
class SpecConstants {
 public:
  SpecConstants& set(uint32_t id, uint32_t value);
  SpecConstants& set_float(uint32_t id, float value);
  std::string key() const;  // printable, identifies the specialisation
  const std::vector<VkSpecializationMapEntry>& entries() const { return entries_; }
  const std::vector<uint32_t>& data() const { return data_; }

 private:
  std::vector<VkSpecializationMapEntry> entries_;
  std::vector<uint32_t> data_;
};

class ComputePipeline {
 public:
  ComputePipeline(VkDevice device, const ShaderCode& code, uint32_t n_buffers, uint32_t push_bytes,
                  const SpecConstants& spec);
  VkPipeline pipeline() const { return pipeline_.get(); }
  VkPipelineLayout layout() const { return layout_.get(); }
  VkDescriptorSetLayout set_layout() const { return set_layout_.get(); }
  uint32_t n_buffers() const { return n_buffers_; }
  uint32_t push_bytes() const { return push_bytes_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  uint32_t n_buffers_, push_bytes_;
  UniqueDescriptorSetLayout set_layout_;
  UniquePipelineLayout layout_;
  UniquePipeline pipeline_;
};

class PipelineCache {
 public:
  explicit PipelineCache(VkDevice device) : device_(device) {}
  // The pipeline for this shader and specialisation, built on first request.
  const ComputePipeline& get(const ShaderCode& code, uint32_t n_buffers, uint32_t push_bytes,
                             const SpecConstants& spec);
  size_t size() const;

 private:
  VkDevice device_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<ComputePipeline>> pipelines_;
};

}  // namespace attn::vk
