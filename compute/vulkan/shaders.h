// The SPIR-V of the compute shaders in shaders/, compiled by glslc at build time and embedded.
#pragma once
#include "compute/vulkan/pipeline.h"

namespace attn::vk {

// Dense and block-sparse attention; `unrolled`: keys of a tile unrolled (GPUs) or looped (CPUs);
// `kv16`: Q, K and V stored in 16 bits (spec constant 16: 1 bf16, 0 f16).
ShaderCode attention_ranges_shader(bool unrolled, bool kv16 = false);
// Index-sparse attention (per-query key lists).
ShaderCode attention_indices_shader(bool unrolled, bool kv16 = false);
// Line-sparse attention (key columns and diagonals, formed per row on the fly).
ShaderCode attention_lines_shader(bool unrolled, bool kv16 = false);
ShaderCode tile_probabilities_shader();  // pooled probabilities of a tile
// Selector helpers (selectors.h).
ShaderCode topk_scores_shader();   // raw q.k scores of a chunk of rows as ordered bits
ShaderCode topk_select_shader();   // per-row radix select and ordered compaction
ShaderCode block_pool_shader();    // mean pooling of row blocks
ShaderCode block_scores_shader();  // pooled query blocks x pooled key blocks

}  // namespace attn::vk
