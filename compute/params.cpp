#include "compute/params.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
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
    if (s.type == ParamSpec::Type::Enum && (v < 0 || v >= double(s.choices.size())))
      throw Error(ErrorCode::BadParameter,
                  variant_id + "(" + s.name + "): must be one of " + join_names(s.choices));
    if (s.type == ParamSpec::Type::Bool && v != 0 && v != 1)
      throw Error(ErrorCode::BadParameter, where + "must be 0 or 1");
    if (v < s.min || v > s.max)
      throw Error(ErrorCode::BadParameter,
                  where + "out of range [" + fmt(s.min) + ", " + fmt(s.max) + "]");
    out[s.name] = v;
  }
  return out;
}

double param_from_text(const ParamSpec* spec, const std::string& text, const std::string& where) {
  if (spec && spec->type == ParamSpec::Type::Enum) {
    for (size_t i = 0; i < spec->choices.size(); ++i)
      if (spec->choices[i] == text) return double(i);
    throw Error(ErrorCode::BadParameter, where + ": '" + text + "' is not one of " +
                                             join_names(spec->choices) +
                                             did_you_mean(text, spec->choices));
  }
  if (text == "true") return 1;
  if (text == "false") return 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw Error(ErrorCode::InvalidArgument, "'" + text + "' is not a number (" + where + ")");
  return v;
}

std::string param_to_text(const ParamSpec& spec, double v) {
  if (spec.type == ParamSpec::Type::Enum && v >= 0 && v < double(spec.choices.size()))
    return spec.choices[size_t(v)];
  char buf[64];
  auto res = spec.type == ParamSpec::Type::Float ? std::to_chars(buf, buf + sizeof buf, v)
                                                 : std::to_chars(buf, buf + sizeof buf, int64_t(v));
  return std::string(buf, res.ptr);
}

}  // namespace attn
