// The normalisers (scores of the kept keys -> probabilities, see compute/score_mod.h) as one
// table, read by the registry: a new normaliser is one row here and its arithmetic in
// compute/score_mod.cpp.
#pragma once
#include <vector>

#include "compute/score_mod.h"
#include "compute/variants/modifiers/modifier_table.h"

namespace attn {

// Every normaliser, in display order (softmax, the default, first).
const std::vector<ModifierEntry<Normaliser>>& normaliser_table();

}  // namespace attn
