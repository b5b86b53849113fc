// Rotary position embeddings as the Llama family applies them (HF's rotate_half convention:
// dimension i pairs with i + d/2), with the rope_scaling types "linear", "dynamic" (NTK) and
// "llama3". Frequencies and angles are computed in f32, as transformers does.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/formats/hf_config.h"

namespace attn::models {

class Rope {
 public:
  // Throws Error(Unsupported) naming `source` for a scaling type other than the above, and
  // Error(Format) for an odd head dimension.
  Rope(int head_dim, double theta, const std::optional<RopeScaling>& scaling, int64_t max_positions,
       const std::string& source);

  // Inverse frequencies f32 [d/2] used for a sequence of `n` tokens ("dynamic" grows the base
  // once n exceeds max_position_embeddings).
  std::vector<float> inv_freq(int n) const;
  // Rotates x f32 [heads, n, d] in place for positions pos0 .. pos0 + n - 1 (pos0 > 0: tokens
  // appended to a KV cache; "dynamic" scaling then sees the whole length pos0 + n). `inverse`
  // rotates the other way: the transpose, which carries gradients back through RoPE.
  void apply(float* x, int heads, int n, int threads, int pos0 = 0, bool inverse = false) const;
  // Rotates rows x f32 [n, d] in place, row r to position pos[r]; "dynamic" scaling sees a
  // sequence of `length` tokens. What a KV cache uses when kept keys change position.
  void apply_at(float* x, int n, const int32_t* pos, int length, bool inverse = false) const;

 private:
  int d_ = 0;
  double theta_ = 10000.0;
  std::string type_;  // "" (plain), "linear", "dynamic", "llama3"
  double factor_ = 1.0;
  int64_t max_positions_ = 0;
  std::vector<float> base_inv_freq_;  // f32 [d/2], after static scaling
};

}  // namespace attn::models
