// KV-cache policies for incremental decoding: which keys and values a causal model keeps
// (eviction), in what precision it stores them, and which positions kept tokens take.
//
// A policy is written like a variant: pieces joined by '+', at most one eviction piece (default
// kv_full) and one precision piece (default: f32), e.g.
//   "kv_streaming(sinks=4,window=252)"   "kv_h2o(budget=128,recent=32)+kv_quant(bits=4)"
//   "kv_fp8(format=e4m3)"                "kv_recent(window=64,reposition=false)"
//
// Rules every eviction piece follows (step t is the token at stream position t):
//  * token t's K/V is appended, its query attends over the cache, and only then do score-based
//    policies evict (so a budget is what the next step attends over, its own token included);
//  * every budget and window counts the current token: kv_streaming(sinks,window) lets step t
//    see tokens 0..sinks-1 and t-window+1..t, as the sinks_window pattern does;
//  * decisions are per layer and per KV head; a GQA group scores with the sum of its query heads;
//  * a prefill of N tokens attends in full (causally) and the policy then evicts once, scoring
//    with every prefill query (h2o), the last one (tova) or the last `window` (snapkv, pyramidkv).
// Positions (reposition, default true): each kept key and the query take their 0-based slot in
// the cache after appending; rotary models cache keys before rotation and rotate them by slot at
// every step (as StreamingLLM does), absolute-position models give a new token the position of
// its slot and never recompute cached K/V. With reposition=false they keep their stream position.
#pragma once
#include <string>
#include <vector>

#include "compute/variant.h"

namespace attn {

struct KvPolicy {
  enum class Evict { Full, Recent, Streaming, H2o, Tova, SnapKv, PyramidKv, Quest };
  enum class Precision { F32, Quant, Fp8, Fp16, Bf16 };

  std::string spec = "kv_full";  // canonical text (every parameter spelled out)
  Evict evict = Evict::Full;
  Precision precision = Precision::F32;
  bool reposition = true;
  // Eviction parameters (those the piece does not take stay 0).
  int window = 0, sinks = 0, budget = 0, recent = 0, kernel = 0, page = 0, k = 0;
  double beta = 0;
  // Precision parameters: kv_quant bits and group; axes true = per channel (K's default);
  // kv_fp8 format.
  int bits = 0, group = 0;
  bool k_per_channel = true, v_per_channel = false;
  bool e4m3 = true;

  // True when eviction reads attention probabilities (h2o, tova, snapkv, pyramidkv).
  bool needs_scores() const;
  // True when eviction happens once, after the prefill (snapkv, pyramidkv).
  bool prefill_only() const;
  // Entries layer `layer` (of n_layers) keeps once a step (or the prefill) has attended, ready
  // for the next token; -1 = no bound (kv_full, kv_quest, and snapkv/pyramidkv after their one
  // compression).
  int keep_after(int layer, int n_layers) const;
  // Bytes one cached element of K or V takes in this precision (kv_quant: bits/8 plus its share
  // of the group's scale and minimum, 2 bytes each).
  double key_bytes_per_element(int head_dim) const;
  double value_bytes_per_element(int head_dim) const;
};

// Every KV piece (eviction first, then precision), with schemas and sources.
const std::vector<VariantInfo>& kv_pieces();

// Parses a policy. Throws Error(UnknownVariant) for an unknown piece, Error(BadParameter) for an
// out-of-range or unknown parameter (and budget < recent, window > budget and the like), and
// Error(InvalidArgument) for two eviction or two precision pieces or malformed text.
KvPolicy make_kv_policy(const std::string& spec);

// PyramidKV's budget for one layer (keys kept besides the observation window): linearly from
// 2(budget-window) - m at layer 0 down to m = (budget-window)/beta at the last layer, so the
// layers share (budget-window) per layer on average (Cai et al. 2024).
int pyramid_layer_keep(int budget, int window, double beta, int layer, int n_layers);

}  // namespace attn
