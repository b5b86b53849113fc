// Score modifiers: temperature (Vaswani et al. 2017's scale, made adjustable), ALiBi's linear
// distance bias (Press et al. 2022) and Gemma 2's soft-capping. The arithmetic lives in
// compute/score_mod.cpp, where kernels switch on ScoreMod::Kind once per tile.
#include "compute/variants/modifiers/score_mods.h"

#include "compute/variants/patterns.h"

namespace attn {

const std::vector<ModifierEntry<ScoreMod>>& score_mod_table() {
  using K = ScoreMod::Kind;
  static const std::vector<ModifierEntry<ScoreMod>> table = {
      {.info = {"temperature",
                "Temperature",
                "score-mod",
                kVaswaniSource,
                "Divides the scaled scores by t (t < 1 sharpens, t > 1 flattens).",
                {float_param("t", 0.01, 100, 1, "temperature")}},
       .kind = K::Temperature,
       .a_param = "t"},
      // a = 8: the paper's geometric slope sequence 2^(-8/H), 2^(-16/H), ...
      {.info = {"alibi",
                "ALiBi",
                "score-mod",
                "Press, Smith, Lewis 2022, Train Short, Test Long: Attention with Linear Biases "
                "Enables Input Length Extrapolation",
                "Subtracts a per-head slope times the distance qp - kp (slopes 2^(-8(h+1)/H)).",
                {}},
       .kind = K::Alibi,
       .a = 8.0f},
      {.info = {"softcap",
                "Soft-capping",
                "score-mod",
                "Gemma Team 2024, Gemma 2: Improving Open Language Models at a Practical Size",
                "Squashes scores smoothly into (-cap, cap): cap * tanh(s / cap).",
                {float_param("cap", 0.1, 1000, 50, "cap on the absolute score")}},
       .kind = K::Softcap,
       .a_param = "cap"},
  };
  return table;
}

}  // namespace attn
