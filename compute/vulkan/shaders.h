// The SPIR-V of the compute shaders in shaders/, compiled by glslc at build time and embedded.
#pragma once
#include "compute/vulkan/pipeline.h"

namespace attn::vk {

ShaderCode attention_ranges_shader();   // dense and block-sparse attention
ShaderCode attention_indices_shader();  // index-sparse attention (per-query key lists)
ShaderCode tile_probabilities_shader(); // pooled probabilities of a tile

}  // namespace attn::vk
