// One row of the score-modifier and normaliser tables (score_mods.h, normalisers.h): a piece's
// schema and what it builds. Both pieces are a kind and one number `a` (score_mod.h), which a
// row either fixes or reads from one of the piece's parameters.
#pragma once
#include "compute/variant.h"

namespace attn {

template <class Piece>  // ScoreMod or Normaliser
struct ModifierEntry {
  VariantInfo info;
  typename Piece::Kind kind;
  float a = 0.0f;                 // the piece's number when a_param is null
  const char* a_param = nullptr;  // else the parameter that gives it

  // `params` already resolved by resolve_params.
  Piece make(const Params& params) const { return {kind, a_param ? float(params.at(a_param)) : a}; }
};

}  // namespace attn
