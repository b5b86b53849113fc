// One layer's attention sublayer as the forward pass runs it, opened for step-through displays
// (app/core/teaching/head_steps.h): the projections as the checkpoint stores them and X, the
// sublayer's input after its norm, rebuilt from a traced forward pass by the same norm call.
//
//   ReverseTrace tr;
//   model->forward(in, {.trace = &tr});
//   AttentionParts a = model->attention_parts(tr, layer);
//   // Q of head h, dim j, token t = X[t, :] . column (a.q_col0 + h*d + j) of a.q (+ bias)
#pragma once
#include <vector>

#include "models/arch/layers.h"
#include "models/arch/rope.h"

namespace attn::models {

struct AttentionParts {
  // q: hidden -> H*d at output columns [q_col0, q_col0 + H*d); k, v: hidden -> H_kv*d at their
  // columns; GPT-2's fused c_attn is the same Linear three times with offsets 0, C and 2C.
  Linear q, k, v;
  int q_col0 = 0, k_col0 = 0, v_col0 = 0;
  Linear o;                    // H*d -> hidden: head h's rows are [h*d, (h+1)*d)
  const Rope* rope = nullptr;  // Llama family: Q and K rotated after the projection; else null
  std::vector<float> x;        // f32 [N, hidden]: the sublayer's input after its norm
  const char* norm = "";       // what made x: "ln_1", "input_layernorm (RMSNorm)", "none"
};

// Element (r, c) of a Linear's weight in the y = x W orientation: r an input feature, c an output
// feature, whatever the stored layout (nn.Linear [out, in] or Conv1D [in, out]).
float linear_weight(const Linear& l, int r, int c);

}  // namespace attn::models
