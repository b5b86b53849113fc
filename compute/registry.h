// The registry lists every variant piece (patterns, score modifiers, normalisers) with its
// schema, and builds a Variant from a spec string. This is what the GUI and CLI use.
//
// Spec grammar (parsed by compute/spec.h):  piece ('+' piece)*      piece := id [ '(' name '='
// value (',' name '=' value)* ')' ] At most one pattern and one normaliser; modifiers apply in
// order. At most one approximation (compute/approximation.h): one that replaces attention
// (Approximation::Kind::Replace) stands alone; one that wraps it (Kind::Wrap) composes with a
// pattern, modifiers and a normaliser, and is written last. The pieces themselves are the
// tables in registry.cpp: registry_pieces(), which `attnscope variants` prints. Examples:
//   "dense"   "window(size=256)"   "sinks_window(sinks=4,window=256)+softcap(cap=30)"
//   "block_topk(block=64,k=8)+sigmoid"   "selective"   "linear(feature=elu1)"
//   "sinks_window(sinks=4,window=64)+delta(stride=16)"
#pragma once
#include <string>
#include <vector>

#include "compute/variant.h"

namespace attn {

enum class PieceKind { Pattern, ScoreMod, Normaliser, Dense, Selective, Approximation };

struct PieceInfo {
  PieceKind kind;
  VariantInfo info;
};

// The kind's word in tables and JSON: "pattern", "score-mod", "normaliser", ...
const char* piece_kind_name(PieceKind kind);

// Every registered piece, in display order.
const std::vector<PieceInfo>& registry_pieces();

// Looks up one piece; throws Error(UnknownVariant) listing the known ids.
const PieceInfo& registry_piece(const std::string& id);

// Parses and builds a variant; throws Error(UnknownVariant | BadParameter | InvalidArgument) with a
// message that names the offending piece or parameter.
Variant make_variant(const std::string& spec);

// Builds a variant from one piece id and a parameter map (the GUI's path).
Variant make_variant(const std::string& id, const Params& params);

// The id of the pattern piece of `spec` ("window" for "window(size=8)+softcap(cap=3)"), or
// "dense" when it has none ("softcap(cap=3)", "selective"). Throws like make_variant on malformed
// text or unknown piece ids. Reads the pieces with parse_spec (compute/spec.h).
std::string spec_pattern_id(const std::string& spec);
// The family a variant belongs to, for grouping in plots and tables: its pattern piece's id, else
// its approximation's ("performer" for "performer(features=64)"), else its first piece's
// ("softcap" for "softcap(cap=3)"); "dense" for dense. Throws like spec_pattern_id.
std::string spec_family_id(const std::string& spec);

}  // namespace attn
