// Factories of every pattern: static masks in compute/variants/patterns/, dynamic selectors in
// compute/variants/selectors/, one file each, registered in compute/registry.cpp's table.
// `info()` gives the id, source and parameter schema (`attnscope variants` prints them);
// `make(params)` expects parameters already resolved by resolve_params (defaults filled, ranges
// checked) and checks cross-parameter rules.
#pragma once
#include <memory>

#include "compute/variant.h"

namespace attn {

struct PatternFactory {
  VariantInfo (*info)();
  std::shared_ptr<const Pattern> (*make)(const Params& params);
};

// Static patterns.
extern const PatternFactory kWindowPattern;
extern const PatternFactory kSinksWindowPattern;
extern const PatternFactory kStridedPattern;
extern const PatternFactory kFixedPattern;
extern const PatternFactory kDilatedPattern;
extern const PatternFactory kBigBirdPattern;
// Dynamic selectors.
extern const PatternFactory kBlockTopkPattern;
extern const PatternFactory kTopkPattern;
extern const PatternFactory kTopPPattern;
extern const PatternFactory kVerticalSlashPattern;
extern const PatternFactory kH2oPattern;
extern const PatternFactory kSketchWalkPattern;
extern const PatternFactory kTopThetaPattern;
extern const PatternFactory kLshPattern;
extern const PatternFactory kKmeansPattern;
extern const PatternFactory kLokiPattern;
extern const PatternFactory kHyperPattern;

// make() of a piece class whose constructor reads its parameters (already resolved):
//   const PatternFactory kTopkPattern = {topk_info, make_from_params<Pattern, TopkPattern>};
template <class Base, class Piece>
std::shared_ptr<const Base> make_from_params(const Params& params) {
  return std::make_shared<const Piece>(params);
}

// The source of the pieces that are part of the original Transformer (dense, temperature, softmax).
inline constexpr const char* kVaswaniSource = "Vaswani et al. 2017, Attention Is All You Need";

// Shorthand for parameter schemas.
inline ParamSpec int_param(const char* name, double min, double max, double def, const char* help) {
  return {name, ParamSpec::Type::Int, min, max, def, help, {}};
}
inline ParamSpec float_param(const char* name, double min, double max, double def,
                             const char* help) {
  return {name, ParamSpec::Type::Float, min, max, def, help, {}};
}
inline ParamSpec bool_param(const char* name, bool def, const char* help) {
  return {name, ParamSpec::Type::Bool, 0, 1, def ? 1.0 : 0.0, help, {}};
}
// A word parameter: `choices` in index order, `def` an index.
inline ParamSpec enum_param(const char* name, std::vector<std::string> choices, int def,
                            const char* help) {
  return {name, ParamSpec::Type::Enum, 0, double(choices.size()) - 1, double(def),
          help, std::move(choices)};
}

}  // namespace attn
