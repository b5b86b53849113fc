// The query-key joint embedding of one head (AttentionViz: Yeh et al. 2023, "AttentionViz: A
// Global View of Transformer Attention"): the head's queries and keys, over one or many inputs,
// placed in one 2-D map where a query lies near the keys it attends to.
//
// Before projecting, the keys are translated so that their mean is the queries' mean (adding one
// vector to every key adds the same amount to each of a query's scores, which the softmax
// ignores) and queries and keys are scaled by c and 1/c so that their mean norms agree (q.k is
// unchanged). Then |q - k|^2 = |q|^2 + |k|^2 - 2 q.k: near means a large score for queries and
// keys of typical norm. Projections:
//   pca   the top two principal axes of queries and keys together (exact, Eigen's SVD)
//   tsne  t-SNE (van der Maaten & Hinton 2008, "Visualizing Data using t-SNE"): exact gradients,
//         perplexity-calibrated Gaussian affinities, Student-t similarities, early
//         exaggeration 12 for the first 250 of the iterations, momentum 0.5 then 0.8; seeded,
//         so the same call gives the same map. O(n^2) per iteration: at most `max_points` points.
#pragma once
#include <atomic>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "models/arch/model.h"
#include "models/arch/substitution.h"

namespace attn::core {

struct QkOptions {
  int layer = 0, head = 0;
  std::string method = "pca";  // pca | tsne
  double perplexity = 30;      // tsne
  int iterations = 750;        // tsne
  uint64_t seed = 1;
  int max_points = 4000;  // queries + keys over every input (Error above it)
  const models::Substitution* substitution = nullptr;  // patterns under a variant
  int threads = 0;
  const std::atomic<bool>* cancel = nullptr;  // checked between passes and t-SNE iterations
};

struct QkPoint {
  float x = 0, y = 0;
  bool key = false;  // a key (else a query)
  int input = 0;     // which input
  int position = 0;  // token position in it
};

struct QkEmbedding {
  int layer = 0, head = 0, kv_head = 0;
  std::string method;
  double scale = 1;             // c: queries were multiplied by c, keys divided by it
  std::vector<QkPoint> points;  // queries then keys of input 0, then of input 1, ...
  std::vector<std::vector<std::string>> labels;  // [inputs][N_i] token display labels
  // Each input's attention pattern of the head, f32 [N_i, N_i]: a query's row is what it
  // attended to (the row shown when a query is picked).
  std::vector<std::vector<float>> patterns;
  // How well the 2-D distances keep the scores: Spearman's rho, over every visible (query, key)
  // pair of each input, between -distance and q.k (1: nearest keys are the highest-scored).
  double rank_fidelity = 0;
  // Index of a query point's input and position -> its row in patterns.
  const std::vector<float>* row(int point, int* n) const;
};

// Runs the model on each input (one forward each, Q and K captured at the layer) and projects.
// Throws Error(InvalidArgument) for a layer or head the model does not have, an unknown method,
// more than max_points points, or a vision/text input the model cannot take; Error(Cancelled)
// once *o.cancel is true.
QkEmbedding qk_embedding(const models::Model& model, const std::vector<models::ModelInput>& inputs,
                         const QkOptions& o);

// PCA and t-SNE on rows of x f32 [n, dim] -> f32 [n, 2] (exposed for the tests).
std::vector<float> pca_2d(const std::vector<float>& x, int n, int dim);
std::vector<float> tsne_2d(const std::vector<float>& x, int n, int dim, double perplexity,
                           int iterations, uint64_t seed,
                           const std::atomic<bool>* cancel = nullptr);

nlohmann::json to_json(const QkEmbedding& e);

// The "qk" figure's data; the subtitle names the model.
struct FigureData;
FigureData qk_figure(const QkEmbedding& e, const std::string& model_name);

}  // namespace attn::core
