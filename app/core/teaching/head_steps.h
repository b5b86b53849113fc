// One head's arithmetic, step by step, on a short input: every stage a small labelled matrix of
// the real numbers the forward pass computed, each cell with the dot product or sum that made it.
//
//   X (the sublayer's input after its norm)
//     -> Q, K, V         X W + b for the head's columns (Llama family: Q and K after RoPE;
//                        GQA: the KV head the query head shares)
//     -> scores          Q K^T
//     -> scaled          Q K^T / sqrt(d)
//     -> masked          the causal rule and the variant's kept set (dropped cells marked)
//     -> weights         softmax over the kept keys (or the variant's normaliser)
//     -> out             weights x V: the head's output
//     -> proj            out W_o[head rows]: the head's contribution to the residual stream
//
// Q, K, V, scaled (kept cells), weights and out are the forward pass's hook values themselves
// (blocks.{l}.attn.q, .k, .v, .scores, .pattern, .out: what `--dump` writes); X comes from the
// model's own norm call (models/arch/attention_parts.h); scores and proj are computed here from
// the hooks and the weights. `recomputed` holds each cell recomputed from its provenance, in
// double, so a test can check the arithmetic the view shows against the hook values.
//
//   core::HeadSteps s = core::head_steps(*model, in, {.layer = 0, .head = 1});
//   const core::StepStage& w = s.stage("weights");   // w.at(i, j), w.how[w.index(i, j)]
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/core/session/model_catalog.h"

namespace attn::core {

// The longest input the step-through takes (a teaching view: every number is printed).
constexpr int kHeadStepsMaxTokens = 32;

struct StepStage {
  std::string id;     // x | q | k | v | scores | scaled | masked | weights | out | proj
  std::string title;  // "Q = X W_q + b_q"
  std::string hook;   // the hook whose values these are ("blocks.0.attn.q"), or "" (computed)
  std::string note;   // one line: weight shapes, the RoPE, the shared KV head, the mask...
  int rows = 0, cols = 0;
  bool key_columns = false;             // columns are keys (tokens), else feature dimensions
  std::vector<std::string> row_labels;  // [rows] "3 cat"
  std::vector<std::string> col_labels;  // [cols] "3 cat" or "7"
  std::vector<float> values;            // f32 [rows, cols]
  std::vector<uint8_t> dropped;         // [rows, cols] 0 kept, 1 hidden by the causal rule,
                                        // 2 dropped by the variant; empty = none dropped
  std::vector<std::string> how;         // [rows, cols] the provenance shown on hover
  std::vector<double> recomputed;       // f64 [rows, cols] from the provenance; NaN = not
                                        // recomputed (e.g. a non-softmax normaliser)
  size_t index(int r, int c) const { return size_t(r) * size_t(cols) + size_t(c); }
  float at(int r, int c) const { return values[index(r, c)]; }
  bool is_dropped(int r, int c) const { return !dropped.empty() && dropped[index(r, c)]; }
  std::string shape() const;  // "[8 x 32]"
};

struct HeadStepsRequest {
  int layer = 0;
  int head = 0;              // query head
  std::string variant = "";  // "" or "dense": the model's own attention; else a variant spec
                             // substituted in this head of this layer
  int threads = 0;  // 0 = all, as a --dump pass runs (the GEMMs' split follows the threads)
};

struct HeadSteps {
  std::string family;  // gpt2 | llama | bert
  int layer = 0, head = 0, kv_head = 0;
  int n_heads = 0, n_kv_heads = 0, d = 0, hidden = 0, n = 0;
  float scale = 0;  // 1/sqrt(d) (or the model's scale)
  bool causal = true;
  std::string variant = "dense";  // canonical spec of the substituted variant
  std::string normaliser = "softmax";
  std::vector<std::string> tokens;  // [n] display labels "0 The"
  std::vector<StepStage> stages;    // in the order above
  // The stage `id`; throws Error(InvalidArgument) for an unknown id.
  const StepStage& stage(const std::string& id) const;
};

// The stages of `r.head` of `r.layer` on `in` (text ids; labels used when given). Throws
// Error(InvalidArgument) with a message for the user for more than kHeadStepsMaxTokens tokens,
// an empty input, a layer or head out of range, a vision model or a bad variant spec, and
// Error(Unsupported) for an architecture that does not open its attention sublayer.
HeadSteps head_steps(const Model& model, const ModelInput& in, const HeadStepsRequest& r);

// The message for an input of `n` tokens, or "" when the step-through takes it.
std::string head_steps_refusal(int n);

}  // namespace attn::core
