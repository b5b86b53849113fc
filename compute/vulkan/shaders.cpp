#include "compute/vulkan/shaders.h"

#include <cstdint>

namespace attn::vk {

namespace {

const uint32_t kAttentionRangesUnrolled[] =
#include "attention_ranges_unrolled.inc"
    ;
const uint32_t kAttentionRangesLooped[] =
#include "attention_ranges_looped.inc"
    ;
const uint32_t kAttentionIndicesUnrolled[] =
#include "attention_indices_unrolled.inc"
    ;
const uint32_t kAttentionIndicesLooped[] =
#include "attention_indices_looped.inc"
    ;
const uint32_t kTileProbabilities[] =
#include "tile_probabilities.inc"
    ;

}  // namespace

ShaderCode attention_ranges_shader(bool unrolled) {
  if (unrolled)
    return {"attention_ranges_unrolled", kAttentionRangesUnrolled, sizeof kAttentionRangesUnrolled};
  return {"attention_ranges_looped", kAttentionRangesLooped, sizeof kAttentionRangesLooped};
}
ShaderCode attention_indices_shader(bool unrolled) {
  if (unrolled)
    return {"attention_indices_unrolled", kAttentionIndicesUnrolled,
            sizeof kAttentionIndicesUnrolled};
  return {"attention_indices_looped", kAttentionIndicesLooped, sizeof kAttentionIndicesLooped};
}
ShaderCode tile_probabilities_shader() {
  return {"tile_probabilities", kTileProbabilities, sizeof kTileProbabilities};
}

}  // namespace attn::vk
