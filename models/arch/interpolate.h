// Resampling of ViT position embeddings to another patch grid, as transformers'
// interpolate_pos_encoding does: torch.nn.functional.interpolate(mode="bicubic",
// align_corners=False, size=(new_h, new_w)) over the [C, h, w] grid of patch embeddings
// (cubic convolution with A = -0.75, border indices clamped).
#pragma once
#include <vector>

namespace attn::models {

// src f32 [h0 * w0, c] (row-major grid) -> f32 [h * w, c].
std::vector<float> interpolate_grid_bicubic(const float* src, int h0, int w0, int c, int h, int w);

}  // namespace attn::models
