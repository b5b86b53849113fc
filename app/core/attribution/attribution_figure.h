// The attribution figure's data (preset "attribution"): every method's scores over the units,
// the methods' rank agreement, and the deletion curves when measured. Filled from an attribution
// run by attribution_figure(); painted by app/figures/fig_attribution.cpp.
#pragma once
#include <string>
#include <vector>

namespace attn::core {

struct AttributionFigure {
  bool image = false;
  std::string target;                        // "' lamp' at position 21, z = 2.47, p = 0.088"
  std::vector<std::string> methods, titles;  // ids and titles, in the run's order
  // Units shown: text, the ranked tokens (labels [U]); images, every patch of the grid.
  std::vector<std::string> labels;
  std::vector<std::vector<float>> scores;  // per method f32 [U], signed
  int grid_h = 0, grid_w = 0;              // images
  int image_h = 0, image_w = 0;            // images: grey f32 [image_h, image_w] in [0, 1]
  std::vector<float> pixels;
  std::vector<float> spearman;  // f32 [M, M]: Spearman's rho of each pair (1 on the diagonal)
  // Deletion curves of the target's probability (empty without --faithfulness): one per
  // method, then "random" last.
  std::vector<float> fractions;
  std::vector<std::string> curve_names;
  std::vector<std::vector<float>> p_deletion;
  std::vector<double> aopc;  // of each curve, on p
};

}  // namespace attn::core
