// Raw Q/K/V tensors as an attention source: .npy files (NumPy, or attnscope's own hook dumps)
// become an attn::Problem the compute core runs like a captured model layer.
#pragma once
#include <string>

#include "compute/problem.h"

namespace attn::models {

struct RawTensorOptions {
  bool causal = true;  // queries are the last n_q positions; false = bidirectional
  float scale = 0.0f;  // 0 = 1/sqrt(d)
};

// q: [H, N_q, d] (or [N_q, d] for one head), k and v: [H_kv, N_k, d] (or [N_k, d]); any float
// dtype. `labels_json`, when not empty, is a JSON file holding a list of N_k strings (or
// {"labels": [...]}). Throws Error(Io | Format) naming the file, Error(InvalidArgument) naming
// the file and both shapes when they do not fit together.
Problem load_problem_npy(const std::string& q_path, const std::string& k_path,
                         const std::string& v_path, const std::string& labels_json = "",
                         const RawTensorOptions& options = {});

// A folder holding q.npy, k.npy, v.npy (and labels.json), or a hook dump
// (blocks.{layer}.attn.{q,k,v}.npy, labels.json) when `layer` >= 0.
Problem load_problem_dir(const std::string& dir, int layer = -1,
                         const RawTensorOptions& options = {});

}  // namespace attn::models
