// Parameter schemas: every variant declares its parameters so the GUI and CLI can generate
// widgets and flags, and the registry can validate values.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace attn {

struct ParamSpec {
  enum class Type { Int, Float, Bool };
  std::string name;  // e.g. "size"
  Type type = Type::Int;
  double min = 0, max = 0, def = 0;  // inclusive range and default (Bool: 0/1)
  std::string help;                  // one line for tooltips and --help
};

// Parameter values by name; ints and bools are stored as doubles.
using Params = std::map<std::string, double>;

// Fills defaults and checks names, types (integral for Int/Bool) and ranges.
// Throws Error(BadParameter) naming the variant, the parameter and the allowed range.
Params resolve_params(const std::string& variant_id, const std::vector<ParamSpec>& specs,
                      const Params& given);

}  // namespace attn
