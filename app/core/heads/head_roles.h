// Head roles: what one attention head does, as scores in [0, 1], computed from its attention
// rows (and, for the no-op role, its output and value norms). The detectors are plain functions
// of a head's rows, so the same code scores a hand-made pattern in a test, a head of any panel in
// the app's head grid (head_metrics.h) and every head of a model over a corpus (head_atlas.h).
//
// Positions: query row i of a head with n_q queries over n_k keys sits at key position
// t = n_k - n_q + i (causal decoders: n_q = n_k, t = i). Distances are t - k.
//
//   previous_token  mean over queries t >= 2 of A[t, t-1]. Query 1 is left out: its previous
//                   token is the first token, whose mass is the sink's (Olsson et al. 2022, "In-
//                   context Learning and Induction Heads"; TransformerLens's previous-token
//                   detector; models/train/measure_text.py's protocol)
//   duplicate_token mean over queries whose token occurred before of the mass on its earlier
//                   occurrences (TransformerLens's duplicate-token detector; Wang et al. 2022,
//                   "Interpretability in the Wild"). On a repeated sequence: the mass from each
//                   token of the second copy on the same token of the first copy
//   induction       mean over queries whose token occurred before of the mass on the tokens
//                   that followed its earlier occurrences (Olsson et al. 2022). On a repeated
//                   random sequence BOS + R + R: from each token of the second copy to the token
//                   after its earlier occurrence (measure_text.py's protocol)
//   distance        mean over queries t >= 1 of the expected distance |t - k| under the row,
//                   divided by the largest distance the row can reach: 0 = attends to itself,
//                   1 = to the farthest key (mean attention distance, Dosovitskiy et al. 2021)
//   offset          positional concentration: the largest share of all mass of queries t >= 1
//                   that lies at one fixed offset t - k (1 for a head that always looks d tokens
//                   back; the offset is reported beside it)
//   sink            mean over queries t >= 1 of A[t, 0], the mass on the first token (Xiao et
//                   al. 2023, "Efficient Streaming Language Models with Attention Sinks")
//   no_op           mean over queries t >= 1 of A[t, 0] * max(0, 1 - |o_t| / mean_k |v_k|): mass
//                   on the first token while the head's output is small against its values
//                   (dormant heads: Guo et al. 2024, "Active-Dormant Attention Heads"; Gu et al.
//                   2024, "When Attention Sink Emerges in Language Models")
//   long_range      mean over queries with such keys of the mass on keys more than D tokens
//                   away, the first token excepted (that mass is the sink's); D = 32 by default
//   retrieval       share of copy steps whose most-attended key is the token being copied: at
//                   a copy step the model's top-1 next token is the one that followed an earlier
//                   occurrence of the query's token (copy-paste retrieval, Wu et al. 2024,
//                   "Retrieval Head Mechanistically Explains Long-Context Factuality"); the
//                   caller marks the copy steps (HeadRows::copy_source)
// A score without the queries it needs (no repeated token, too short an input, no norms) is NaN.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn::core {

struct HeadRole {
  std::string name;        // stable id in JSON and sessions: "previous_token"
  std::string title;       // panel and colour-bar title
  std::string definition;  // one line: what the number is
  std::string source;      // where the detector comes from
};

// Every role, in display order.
const std::vector<HeadRole>& head_roles();
// Index in head_roles(); throws Error(InvalidArgument) listing the names.
int head_role_index(const std::string& name);

// One head's attention, row by row.
struct HeadRows {
  int n_q = 0, n_k = 0;
  bool causal = true;
  // The probabilities of query i over keys [0, n_k): a pointer to n_k values, valid until the
  // next call (into `scratch` where the source has to convert or copy them).
  std::function<const double*(int i, std::vector<double>& scratch)> row;
  const std::vector<int32_t>* ids = nullptr;  // [n_k] token ids (duplicate, induction); null: NaN
  // On a repeated sequence (ids = prefix + R + R, R of length repeat_period starting at key
  // position repeat_start) duplicate and induction are the positional scores of the second copy
  // alone, as the protocol defines them, whatever tokens R repeats inside itself.
  int repeat_start = 0, repeat_period = 0;
  // [n_q] at a copy step, the key position of the token being copied; -1 elsewhere. Empty:
  // retrieval is NaN.
  std::vector<int> copy_source;
  std::vector<double> out_norm;    // [n_q] |o_t| of the head (no-op); empty: no-op is NaN
  std::vector<double> value_norm;  // [n_k] |v_k| of the head's values
};

struct RoleOptions {
  int long_range = 32;  // D of the long-range role
};

struct RoleScores {
  std::vector<double> value;  // [head_roles()] in [0, 1] or NaN
  int offset = 0;             // the offset t - k of the positional (offset) score
  double get(const std::string& role) const { return value[size_t(head_role_index(role))]; }
};

// Scores of one head. Throws Error(InvalidArgument) for an empty head or ids of the wrong size.
RoleScores role_scores(const HeadRows& h, const RoleOptions& o = {});

// Rows of a dense pattern f32 [n_q, n_k] (row-major), for patterns held in memory.
HeadRows pattern_rows(const float* pattern, int n_q, int n_k, bool causal = true);

}  // namespace attn::core
