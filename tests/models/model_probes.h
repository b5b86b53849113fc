// Helpers of the embedded models' tests (test_default_models.cpp, test_teaching_model.cpp): a
// model card's JSON, a relative comparison with the goldens, and every layer's attention
// probabilities from the C++ forward pass.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "models/arch/hooks.h"
#include "models/arch/model.h"

namespace attn::test {

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  return nlohmann::json::parse(f);
}

// Largest |a - b| / (1 + |b|).
inline double max_rel_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (1.0 + std::abs(double(b[i]))));
  return worst;
}

// Probabilities of every layer for `ids` (pattern[l] is f32 [H, N, N]) and, if asked, the output.
inline std::vector<std::vector<float>> patterns(const models::Model& m,
                                                const std::vector<int32_t>& ids,
                                                models::ModelOutput* out_logits = nullptr) {
  models::Capture cap(models::HookSelection::parse("blocks.*.attn.pattern"));
  models::ModelInput in;
  in.ids = ids;
  models::ModelOutput out = m.forward(in, {.capture = &cap});
  std::vector<std::vector<float>> p;
  for (const auto& l : cap.layers) p.emplace_back(l.pattern.begin(), l.pattern.end());
  if (out_logits) *out_logits = std::move(out);
  return p;
}

}  // namespace attn::test
