// Runs several variants on one problem beside the dense reference and reports them as a table
// and as JSON. Shared by the `run` and `demo` verbs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compute/backend.h"
#include "compute/metrics.h"

namespace attn::cli {

struct ComparisonRow {
  std::string spec;
  Stats stats;
  Metrics metrics;
  bool has_metrics = false;
};

struct Comparison {
  std::vector<ComparisonRow> rows;  // rows[0] is the dense softmax reference, in f32
};

// Runs "dense" (in f32) plus each spec on `backend` in opt.precision (dense again first when
// that is not f32); metrics against the f32 dense unless `metrics` is false.
Comparison compare_variants(const Problem& p, const std::vector<std::string>& specs,
                            Backend& backend, bool metrics, const RunOptions& opt = {});

void print_comparison(const Problem& p, const Comparison& c);
nlohmann::json comparison_json(const Problem& p, const Comparison& c);

}  // namespace attn::cli
