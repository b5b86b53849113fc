// A decode trace: a causal model reads (or samples) tokens one at a time under a KV-cache
// policy, and every step keeps what its query attended over the cache (per layer and query
// head), what the cache held before and after the policy evicted, and which entries were
// stored in reduced precision. The decode lab's step-through view, `attnscope generate
// --trace/--figure` and the decode figure preset read it.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "app/core/decode/decode_figure.h"
#include "app/core/decode/stream.h"
#include "app/core/export/figure_data.h"
#include "models/arch/kv_cache.h"

namespace attn::core {

// Steps kept at most: a step holds layers x heads x cache-length probabilities.
inline constexpr int kMaxTraceSteps = 2048;

struct TraceOptions {
  std::string policy = "kv_full";
  int prefill = -1;       // tokens of the first pass; -1: every given token but the last
                          // (0: no prefill pass, the first step reads token 0)
  int steps = 64;         // one-token passes traced
  bool generate = false;  // past the given tokens, sample the next one (`sampling`)
  SamplingOptions sampling;
  int threads = 0;
  int layer = -1;  // keep the attention of this layer only (-1: every layer; a long trace of a
                   // large model holds steps x layers x heads x cache length floats)
  // Called after each step with the steps done; returning false cancels (Error(Cancelled)).
  std::function<bool(int)> progress;
};

struct TraceStep {
  int position = 0;          // stream position of the token this step read (its query)
  int32_t token = 0;         // that token
  int32_t next = -1;         // the token after it (given or sampled; -1 when the trace ends first)
  float nll = NAN;           // -log p(next) under this step's logits (NaN without a next token)
  int64_t entries = 0;       // cache entries after the step (layers x KV heads)
  double bytes = 0;          // bytes the cache's K/V rows allocated, in the policy's format
  models::KvSnapshot cache;  // attended (before eviction), kept (after), quantised
  std::vector<std::vector<float>> probs;  // [layer] f32 [H, attended]: this step's attention
                                          // (empty for layers the trace did not keep)
};

struct DecodeTrace {
  std::string model, model_type, policy;
  int n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int prefill = 0;                  // tokens of the first pass (0: none)
  int given = 0;                    // tokens given; later ones were sampled
  std::vector<int32_t> ids;         // every token given or sampled, in stream order
  std::vector<std::string> pieces;  // their text (the tokenizer's pieces; ids without one)
  std::vector<TraceStep> steps;

  // Step s's attention of `layer`, query head `head` over stream positions 0..position: the
  // probability where the query attended the entry, NaN where the cache did not hold it.
  std::vector<float> row(int step, int layer, int head) const;
  // Stream positions `layer`'s KV head of query head `head` held after step s (after eviction).
  const std::vector<int32_t>& kept(int step, int layer, int head) const;
  // How many of those are stored in reduced precision (the first ones, in stream order).
  int quantised(int step, int layer, int head) const;
};

// Traces `ids` (prefill, then one token per step) under the policy. Throws Error(Unsupported)
// for a model that cannot decode, Error(InvalidArgument) for empty ids, ids outside the
// vocabulary, a prefill outside [0, ids - 1], steps outside [1, kMaxTraceSteps], a bad
// policy, or too few tokens to trace without `generate`.
DecodeTrace trace_decode(const models::Model& model, const std::string& model_name,
                         const std::vector<int32_t>& ids, const TraceOptions& opt);

// JSON (version 1): model, policy, tokens, and per step the token, next, nll, cache entries and
// bytes, and for `layer` (every layer when -1) each query head's attended positions and
// probabilities and the kept positions.
nlohmann::json trace_json(const DecodeTrace& t, int layer = -1);

// Decode figure data (View::Decode) of `layer`, query `head`, with step `step` in detail (-1:
// the last), the overview binned to at most max_cells per side. Throws Error(InvalidArgument)
// for a step, layer or head the trace does not have.
FigureData decode_figure(const DecodeTrace& t, int layer, int head, int step = -1,
                         int max_cells = 400);

}  // namespace attn::core
