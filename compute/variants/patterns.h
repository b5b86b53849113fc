// Factories of every pattern (static masks and dynamic selectors), one file each in this folder.
// `info()` gives the id, source and parameter schema; `make(params)` expects parameters already
// resolved by resolve_params (defaults filled, ranges checked) and checks cross-parameter rules.
#pragma once
#include <memory>

#include "compute/variant.h"

namespace attn {

struct PatternFactory {
  VariantInfo (*info)();
  std::shared_ptr<const Pattern> (*make)(const Params& params);
};

// Static patterns.
extern const PatternFactory kWindowPattern;       // window(size)
extern const PatternFactory kSinksWindowPattern;  // sinks_window(sinks, window)
extern const PatternFactory kStridedPattern;      // strided(stride)
extern const PatternFactory kFixedPattern;        // fixed(block, summary)
extern const PatternFactory kDilatedPattern;      // dilated(local, base)
extern const PatternFactory kBigBirdPattern;      // bigbird(block, global, window, random, seed)
// Dynamic selectors.
extern const PatternFactory kBlockTopkPattern;      // block_topk(block, k)
extern const PatternFactory kTopkPattern;           // topk(k)
extern const PatternFactory kTopPPattern;           // top_p(block, p)
extern const PatternFactory kVerticalSlashPattern;  // vertical_slash(last_q, vertical, slash)
extern const PatternFactory kH2oPattern;            // h2o(heavy, recent)
extern const PatternFactory kSketchWalkPattern;     // sketch_walk(block, density, sketch_dim, seed)
extern const PatternFactory kTopThetaPattern;       // top_theta(theta, calibrate)
extern const PatternFactory kLshPattern;            // lsh(buckets, rounds, chunk, seed)
extern const PatternFactory kKmeansPattern;         // kmeans(clusters, iters, seed)
extern const PatternFactory kLokiPattern;           // loki(rank, k)
extern const PatternFactory kHyperPattern;          // hyper(buckets, block, samples, seed)

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
