// The score modifiers (s' = f(s, head, positions), see compute/score_mod.h) as one table, read
// by the registry: a new modifier is one row here and its arithmetic in compute/score_mod.cpp.
#pragma once
#include <vector>

#include "compute/score_mod.h"
#include "compute/variants/modifiers/modifier_table.h"

namespace attn {

// Every score modifier, in display order.
const std::vector<ModifierEntry<ScoreMod>>& score_mod_table();

}  // namespace attn
