// The SPIR-V of the compute shaders in shaders/, compiled by glslc at build time and embedded.
#pragma once
#include "compute/vulkan/pipeline.h"

namespace attn::vk {

// Dense and block-sparse attention; `unrolled`: keys of a tile unrolled (GPUs) or looped (CPUs).
ShaderCode attention_ranges_shader(bool unrolled);
// Index-sparse attention (per-query key lists).
ShaderCode attention_indices_shader(bool unrolled);
ShaderCode tile_probabilities_shader();  // pooled probabilities of a tile

}  // namespace attn::vk
