#include "compute/vulkan/shaders.h"

#include <cstdint>

namespace attn::vk {

namespace {

const uint32_t kAttentionRanges[] =
#include "attention_ranges.comp.inc"
    ;
const uint32_t kAttentionIndices[] =
#include "attention_indices.comp.inc"
    ;
const uint32_t kTileProbabilities[] =
#include "tile_probabilities.comp.inc"
    ;

}  // namespace

ShaderCode attention_ranges_shader() {
  return {"attention_ranges", kAttentionRanges, sizeof kAttentionRanges};
}
ShaderCode attention_indices_shader() {
  return {"attention_indices", kAttentionIndices, sizeof kAttentionIndices};
}
ShaderCode tile_probabilities_shader() {
  return {"tile_probabilities", kTileProbabilities, sizeof kTileProbabilities};
}

}  // namespace attn::vk
