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
const uint32_t kAttentionLinesUnrolled[] =
#include "attention_lines_unrolled.inc"
    ;
const uint32_t kAttentionLinesLooped[] =
#include "attention_lines_looped.inc"
    ;
const uint32_t kAttentionRangesUnrolled16[] =
#include "attention_ranges_unrolled16.inc"
    ;
const uint32_t kAttentionRangesLooped16[] =
#include "attention_ranges_looped16.inc"
    ;
const uint32_t kAttentionIndicesUnrolled16[] =
#include "attention_indices_unrolled16.inc"
    ;
const uint32_t kAttentionIndicesLooped16[] =
#include "attention_indices_looped16.inc"
    ;
const uint32_t kAttentionLinesUnrolled16[] =
#include "attention_lines_unrolled16.inc"
    ;
const uint32_t kAttentionLinesLooped16[] =
#include "attention_lines_looped16.inc"
    ;
const uint32_t kTileProbabilities[] =
#include "tile_probabilities.inc"
    ;
const uint32_t kTopkScores[] =
#include "topk_scores.inc"
    ;
const uint32_t kTopkSelect[] =
#include "topk_select.inc"
    ;
const uint32_t kBlockPool[] =
#include "block_pool.inc"
    ;
const uint32_t kBlockScores[] =
#include "block_scores.inc"
    ;

}  // namespace

ShaderCode attention_ranges_shader(bool unrolled, bool kv16) {
  if (kv16)
    return unrolled ? ShaderCode{"attention_ranges_unrolled16", kAttentionRangesUnrolled16,
                                 sizeof kAttentionRangesUnrolled16}
                    : ShaderCode{"attention_ranges_looped16", kAttentionRangesLooped16,
                                 sizeof kAttentionRangesLooped16};
  if (unrolled)
    return {"attention_ranges_unrolled", kAttentionRangesUnrolled, sizeof kAttentionRangesUnrolled};
  return {"attention_ranges_looped", kAttentionRangesLooped, sizeof kAttentionRangesLooped};
}
ShaderCode attention_indices_shader(bool unrolled, bool kv16) {
  if (kv16)
    return unrolled ? ShaderCode{"attention_indices_unrolled16", kAttentionIndicesUnrolled16,
                                 sizeof kAttentionIndicesUnrolled16}
                    : ShaderCode{"attention_indices_looped16", kAttentionIndicesLooped16,
                                 sizeof kAttentionIndicesLooped16};
  if (unrolled)
    return {"attention_indices_unrolled", kAttentionIndicesUnrolled,
            sizeof kAttentionIndicesUnrolled};
  return {"attention_indices_looped", kAttentionIndicesLooped, sizeof kAttentionIndicesLooped};
}
ShaderCode attention_lines_shader(bool unrolled, bool kv16) {
  if (kv16)
    return unrolled ? ShaderCode{"attention_lines_unrolled16", kAttentionLinesUnrolled16,
                                 sizeof kAttentionLinesUnrolled16}
                    : ShaderCode{"attention_lines_looped16", kAttentionLinesLooped16,
                                 sizeof kAttentionLinesLooped16};
  if (unrolled)
    return {"attention_lines_unrolled", kAttentionLinesUnrolled, sizeof kAttentionLinesUnrolled};
  return {"attention_lines_looped", kAttentionLinesLooped, sizeof kAttentionLinesLooped};
}
ShaderCode tile_probabilities_shader() {
  return {"tile_probabilities", kTileProbabilities, sizeof kTileProbabilities};
}

ShaderCode topk_scores_shader() {
  return {"topk_scores", kTopkScores, sizeof kTopkScores};
}
ShaderCode topk_select_shader() {
  return {"topk_select", kTopkSelect, sizeof kTopkSelect};
}
ShaderCode block_pool_shader() {
  return {"block_pool", kBlockPool, sizeof kBlockPool};
}
ShaderCode block_scores_shader() {
  return {"block_scores", kBlockScores, sizeof kBlockScores};
}

}  // namespace attn::vk
