// Attention as a layered graph: the head means that rollout, flow and Chefer et al.'s relevance
// propagate through. Matrices are f64 [N, N], row = query, column = key, one per layer from the
// first; the target is row `row` of the last layer.
//
//   rollout  (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers")
//            Â_l = 0.5 A_l + 0.5 I, rows renormalised; R = Â_L ... Â_1; scores R[row, :].
//   flow     the same paper: the maximum flow from input node (0, j) to node (L, row) in the
//            layered graph whose edge (l-1, j) -> (l, i) has capacity Â_l[i, j].
//   chefer   (Chefer, Gur & Wolf 2021, "Generic Attention-model Explainability for Interpreting
//            Bi-Modal and Encoder-Decoder Transformers", the self-attention rule)
//            Ā_l = mean_h (dz/dA_lh * A_lh)^+; R = I, then R += Ā_l R for l = 1..L; R[row, :].
#pragma once
#include <vector>

namespace attn::core {

using Matrix = std::vector<double>;  // f64 [N, N]

// mean over heads of pattern f32 [H, N, N]; with `grad` f32 [H, N, N], mean_h (grad * A)^+ (or
// mean_h grad * A unclamped when `positive` is false).
Matrix head_mean(const float* pattern, int heads, int n);
Matrix gradient_weighted_mean(const float* pattern, const float* grad, int heads, int n,
                              bool positive);
// 0.5 A + 0.5 I with rows renormalised (rows summing to 0 stay the identity row).
Matrix with_residual(const Matrix& a, int n);

// Row `row` of Â_L ... Â_1, for Â the residual-adjusted matrices (with_residual).
std::vector<double> rollout_row(const std::vector<Matrix>& adjusted, int n, int row);
// The products after each layer: [l] = Â_l ... Â_1, f32 [L, N, N].
std::vector<float> rollout_maps(const std::vector<Matrix>& adjusted, int n);

// Maximum flow into node (layers, row) from each input node (0, j): f64 [N]. `layers` of the
// matrices are used (the first `layers`). Edges of capacity 0 are left out.
std::vector<double> flow_row(const std::vector<Matrix>& adjusted, int layers, int n, int row);
// [l][i][j] = flow_row(adjusted, l + 1, n, i)[j], f32 [L, N, N].
std::vector<float> flow_maps(const std::vector<Matrix>& adjusted, int n);

// Row `row` of (I + Ā_L) ... (I + Ā_1), for Ā the gradient-weighted means.
std::vector<double> chefer_row(const std::vector<Matrix>& weighted, int n, int row);

}  // namespace attn::core
