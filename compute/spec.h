// The one parser of variant spec text. Everything that reads a spec (the registry, the GUI's
// variant slots, sweeps, figure labels) asks here instead of searching for '(' and '+'.
//
// Grammar:  spec  := piece ('+' piece)*
//           piece := id [ '(' [ name '=' value (',' name '=' value)* ] ')' ]
//           id, name := [A-Za-z0-9_]+       value := any run of characters but ',', ')', '(' and
//           blanks (so "1e+3", "-0.5", "true" and sweep ranges like "2..8:+2" or "4|8" are
//           values); blanks are allowed around every token.
// Values stay text: the registry turns them into numbers, sweeps expand them into lists.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace attn {

// One piece of a spec: "window(size=256)" -> {"window", {{"size", "256"}}}.
struct SpecPiece {
  std::string id;
  std::vector<std::pair<std::string, std::string>> params;  // in the order written

  bool operator==(const SpecPiece&) const = default;
};

// Splits a spec into its pieces. Throws Error(InvalidArgument) on malformed text, naming the
// character position and the piece it is in; Error(BadParameter) when a piece names a parameter
// twice. Piece ids are not checked here (registry_piece does that).
std::vector<SpecPiece> parse_spec(const std::string& spec);

// The text of pieces: "id(a=1,b=2)+id2"; a piece without parameters is its bare id.
// parse_spec(format_spec(p)) == p for pieces with valid ids, names and values.
std::string format_spec(const std::vector<SpecPiece>& pieces);
std::string format_spec_piece(const SpecPiece& piece);

}  // namespace attn
