// Substitution: a compute-core variant replaces the model's attention in chosen layers and heads
// (dense softmax elsewhere); the forward pass runs on to logits, and end_to_end() measures the
// effect against the dense run of the same input.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "compute/backend.h"
#include "compute/variant.h"
#include "models/arch/model.h"

namespace attn::models {

struct Substitution {
  const Variant* variant = nullptr;  // what runs in the chosen heads
  Backend* backend = nullptr;        // which backend runs it
  std::vector<int> layers;           // layers to substitute; empty = every layer
  std::vector<int> heads;            // query heads to substitute; empty = every head
  RunOptions run;                    // threads, cancellation
  bool keep_results = false;         // SubstitutedLayer::result kept (every head substituted)

  bool applies(int layer) const;
  // Substituted query heads of a layer with `n_heads` heads, ascending.
  std::vector<int> heads_of(int n_heads) const;
  // Throws Error(InvalidArgument) naming a layer or head the model does not have.
  void check(const ModelInfo& info) const;
};

// End-to-end effect of a substitution: the variant's forward pass against the dense one.
struct EndToEnd {
  // Token logits (LM: next-token distributions; BERT MLM: per-position token distributions).
  bool has_tokens = false;
  std::vector<float> kl;  // f32 [N]: KL(p_dense || p_variant) per position, nats
  double mean_kl = 0, max_kl = 0;
  double top1_agreement = 1;  // fraction of positions whose argmax token agrees
  // Perplexity of the input text under each run (causal LMs: positions 0..N-2 predict
  // ids 1..N-1); NaN when not defined (encoders, a single token).
  double ppl_dense = std::numeric_limits<double>::quiet_NaN();
  double ppl_variant = std::numeric_limits<double>::quiet_NaN();
  // Image classifiers.
  bool has_class = false;
  int class_dense = -1, class_variant = -1;
  bool class_agree = true;
  // Cosine of the CLS embeddings (first token's last hidden state) of encoders (ViT, BERT); NaN
  // for causal LMs, whose first position never changes.
  double cls_cosine = std::numeric_limits<double>::quiet_NaN();
  // The logits themselves (every model with logits; NaN without): the largest |variant - dense|
  // and the relative Frobenius norm ||variant - dense|| / ||dense||, over all positions.
  double logits_max_abs = std::numeric_limits<double>::quiet_NaN();
  double logits_rel = std::numeric_limits<double>::quiet_NaN();
};

// Throws Error(InvalidArgument) when the two outputs do not come from the same model and input.
EndToEnd end_to_end(const ModelInfo& info, const ModelInput& in, const ModelOutput& dense,
                    const ModelOutput& variant);

// end_to_end() for a token model's variant pass whose logits arrive in blocks of vocabulary
// columns (ForwardOptions::logits_sink), so that pass never holds its N x vocab logits: each
// position's log-sum-exp, KL, top-1 and next-token log-probability are accumulated online.
// `dense` (with its logits) must outlive the stream.
class EndToEndStream {
 public:
  // True when `dense` holds one row of logits per token (a text model's head), what the
  // stream compares.
  static bool takes(const ModelInfo& info, const ModelOutput& dense);
  // Throws Error(InvalidArgument) unless takes(info, dense).
  EndToEndStream(const ModelInfo& info, const ModelInput& in, const ModelOutput& dense);
  // Columns [col0, col0 + cols) of the variant's logits, [n_tokens, cols] row-major; blocks come
  // in ascending order and cover every column once.
  void add(int col0, int cols, const float* block);
  // The comparison, once every column has come; `variant` is the pass's output (its hidden state
  // for encoders' CLS cosine; its logits may be empty). With no column added and `variant` being
  // `dense` itself: the dense row (KL 0, agreement 1, the dense perplexity) in one pass.
  EndToEnd finish(const ModelOutput& variant);

 private:
  struct Row {
    double mx_a = 0;                  // the dense row's maximum
    double s_a = 0;                   // sum exp(a - mx_a) so far
    double pd = 0;                    // sum exp(a - mx_a) (a - b) so far
    double m_b = -INFINITY, s_b = 0;  // the variant's running maximum and sum of exp(b - m_b)
    double top_b = -INFINITY;         // the variant's largest logit so far, at top_idx
    int top_a = 0, top_idx = -1;
    double b_next = 0;  // the variant's logit of the next token
    double diff2 = 0, norm2 = 0, max_abs = 0;
  };
  void accumulate(int col0, int cols, const float* block, bool same);
  const ModelInfo& info_;
  const ModelInput& in_;
  const ModelOutput& dense_;
  std::vector<Row> rows_;
  int next_col_ = 0;
};

}  // namespace attn::models
