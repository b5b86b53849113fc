// Parameter schemas: every variant declares its parameters so the GUI and CLI can generate
// widgets and flags, and the registry can validate values.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace attn {

struct ParamSpec {
  enum class Type { Int, Float, Bool, Enum };
  std::string name;  // e.g. "size"
  Type type = Type::Int;
  double min = 0, max = 0, def = 0;  // inclusive range and default (Bool: 0/1; Enum: an index)
  std::string help;                  // one line for tooltips and --help
  std::vector<std::string> choices;  // Enum: the words, in index order (min 0, max size - 1)
  // The name of another parameter whose nonzero value makes this one unused (kmeans' `clusters`
  // once `size` > 0): captions and legends leave it out; the canonical spec keeps it.
  std::string unused_when = {};
};

// Parameter values by name; ints and bools are stored as doubles.
using Params = std::map<std::string, double>;

// Fills defaults and checks names, types (integral for Int/Bool) and ranges.
// Throws Error(BadParameter) naming the variant, the parameter and the allowed range.
Params resolve_params(const std::string& variant_id, const std::vector<ParamSpec>& specs,
                      const Params& given);

// A value as written in a spec: "true"/"false" are 1/0, an Enum parameter takes one of its words
// (stored as its index), anything else must read whole as a number. Throws
// Error(InvalidArgument) naming `where` (e.g. "window.size") otherwise. `spec` may be null
// (parameter unknown): words then fail as not numbers.
double param_from_text(const ParamSpec* spec, const std::string& text, const std::string& where);
// The text of a value: an Enum's word, an integer, or the shortest text of a float.
std::string param_to_text(const ParamSpec& spec, double value);

}  // namespace attn
