// Faithfulness measured: how fast the target falls when the units a method ranks first are
// removed (deletion), how fast it comes back when they are revealed on the baseline (insertion),
// against random orders; and how far the methods agree on the ranking.
//
//   deletion   step k of K: the top ceil(k/K * U) ranked units replaced by the baseline
//              (Samek et al. 2017, "Evaluating the visualization of what a deep neural network
//              has learned"; Petsiuk et al. 2018, RISE, for deletion/insertion)
//   insertion  step k: every ranked unit at the baseline except the top ceil(k/K * U)
//   AOPC       mean over k = 0..K of (value at step 0 - value at step k), deletion; for insertion
//              the area is the mean over k of the value (higher: the top units carry the target)
// Values are z and the target's probability, re-run through the model (with the variant, when
// one is substituted). Ties in a method's scores are broken in a seeded random order, not by
// position, so that a method with many equal scores (flow saturates at 1) is not credited or
// blamed for the raster order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/core/attribution/attribution.h"

namespace attn::core {

struct Curve {
  std::string order;                                                    // a method id, or "random"
  std::vector<float> z_deletion, p_deletion, z_insertion, p_insertion;  // f32 [K + 1]
  double aopc_z = 0, aopc_p = 0;            // deletion: mean of (v_0 - v_k)
  double insertion_z = 0, insertion_p = 0;  // insertion: mean of v_k
};

struct Faithfulness {
  int steps = 0;                 // K
  std::vector<float> fractions;  // f32 [K + 1]: k / K
  std::vector<Curve> curves;     // one per method, then "random" (the mean of the orders)
  int random_orders = 0;
};

struct FaithfulnessOptions {
  int steps = 0;  // K; 0: one unit a step up to 64 ranked units, else 64 steps
  int random_orders = 4;
  uint64_t seed = 1;
  int threads = 0;
};

// Re-runs the model along each method's order. `a` comes from attribute() on the same model,
// input, substitution and baseline.
Faithfulness faithfulness(const models::Model& model, const models::ModelInput& in,
                          const Attribution& a, const AttributionRequest& q,
                          const FaithfulnessOptions& o = {});

// Ranking agreement of two score vectors over the units `units`.
struct RankAgreement {
  std::string a, b;          // method ids
  double kendall_tau = 0;    // tau-b (ties counted on both sides)
  double spearman = 0;       // Pearson correlation of the average ranks
  double top_k_overlap = 0;  // |top k of a ∩ top k of b| / k
  int k = 0;
};
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);
double spearman_rho(const std::vector<double>& x, const std::vector<double>& y);
double top_k_overlap(const std::vector<double>& x, const std::vector<double>& y, int k);
// Every pair of a's methods, over a.ranked; k = min(top_k, units).
std::vector<RankAgreement> rank_agreement(const Attribution& a, int top_k = 5);

// The seed of the tie order for this attribution: drawn from `seed` and the attribution's own
// values (z, target, units), so that every input gets an order of its own and a rerun the same.
uint64_t tie_seed(const Attribution& a, uint64_t seed = 1);
// Units of `ranked` in decreasing order of score, NaN last; ties by lower unit first, or with
// `seed` != 0 in a random order drawn from it.
std::vector<int> order_by_score(const std::vector<float>& scores, const std::vector<int>& ranked,
                                uint64_t seed = 0);

}  // namespace attn::core
