// The attribution figure's data (preset "attribution"): every method's scores over the units,
// the methods' rank agreement, and the deletion curves when measured. Filled from an attribution
// run by attribution_figure(); painted by app/figures/fig_attribution.cpp.
#pragma once
#include <cstdint>
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

// The query-key embedding's figure (preset "qk"): one point per query and key of the head.
struct QkFigure {
  int layer = 0, head = 0;
  std::string method;        // pca | tsne
  double rank_fidelity = 0;  // see qk_embedding.h
  int inputs = 0;
  std::vector<float> x, y;      // f32 [points]
  std::vector<uint8_t> key;     // 1: a key, 0: a query
  std::vector<float> position;  // f32 [points]: position / (tokens - 1) of its input, in [0, 1]
};

}  // namespace attn::core
