// Factories of the score modifiers (s' = f(s, head, positions), see compute/score_mod.h), one
// table entry each, registered like the patterns in patterns.h. `make(params)` expects parameters
// already resolved by resolve_params.
#pragma once
#include "compute/score_mod.h"
#include "compute/variant.h"

namespace attn {

struct ScoreModFactory {
  VariantInfo (*info)();
  ScoreMod (*make)(const Params& params);
};

extern const ScoreModFactory kTemperatureMod;  // temperature(t)
extern const ScoreModFactory kAlibiMod;        // alibi
extern const ScoreModFactory kSoftcapMod;      // softcap(cap)

}  // namespace attn
