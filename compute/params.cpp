#include "compute/params.h"

#include <cmath>
#include <sstream>

#include "compute/error.h"

namespace attn {

namespace {
std::string fmt(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}
}  // namespace

Params resolve_params(const std::string& variant_id, const std::vector<ParamSpec>& specs,
                      const Params& given) {
  for (const auto& [name, value] : given) {
    bool known = false;
    for (const auto& s : specs) known = known || s.name == name;
    if (!known) {
      std::vector<std::string> names;
      for (const auto& s : specs) names.push_back(s.name);
      throw Error(ErrorCode::BadParameter,
                  variant_id + ": unknown parameter '" + name + "'" + did_you_mean(name, names) +
                      (names.empty() ? " (it takes no parameters)"
                                     : " (known: " + join_names(names) + ")"));
    }
  }
  Params out;
  for (const auto& s : specs) {
    auto it = given.find(s.name);
    double v = it == given.end() ? s.def : it->second;
    const std::string where = variant_id + "(" + s.name + "=" + fmt(v) + "): ";
    if (!std::isfinite(v)) throw Error(ErrorCode::BadParameter, where + "value must be finite");
    if (s.type != ParamSpec::Type::Float && v != std::floor(v))
      throw Error(ErrorCode::BadParameter, where + "must be an integer");
    if (s.type == ParamSpec::Type::Bool && v != 0 && v != 1)
      throw Error(ErrorCode::BadParameter, where + "must be 0 or 1");
    if (v < s.min || v > s.max)
      throw Error(ErrorCode::BadParameter,
                  where + "out of range [" + fmt(s.min) + ", " + fmt(s.max) + "]");
    out[s.name] = v;
  }
  return out;
}

}  // namespace attn
