// Streaming evaluation and generation under KV-cache policies (compute/kv/kv_policy.h): a causal
// model reads a token stream far longer than its context, teacher-forced one token per step
// after a prefill, once per policy; per-token loss, running perplexity, what the cache holds and
// costs, and time per step. The CLI's `stream` and `generate`, the decode figures and the app's
// decode views all read these results.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "models/arch/model.h"

namespace attn::core {

struct StreamOptions {
  std::vector<std::string> policies;  // KV-cache policy specs, in order (default: kv_full)
  int prefill = 1;                    // tokens of the first pass (what snapkv/pyramidkv compress)
  int max_tokens = 0;                 // tokens streamed (0 = all of the input)
  int threads = 0;
  bool keep_logits = false;   // keep f32 [T, V] logits per policy (for --dump)
  bool record_cache = false;  // keep the kept positions after every pass (cache timeline)
  // Called after each pass with the policy index and tokens done; returning false cancels.
  std::function<bool(int policy, int tokens)> progress;
};

// One policy over the stream. Rows are tokens: row t is after token t was read.
struct PolicyRun {
  std::string spec;              // canonical policy text
  int tokens = 0;                // tokens read (< the stream's when `error` stopped it)
  std::string error;             // why the policy stopped early ("" when it read everything)
  std::vector<float> nll;        // [tokens - 1]: -log p(token t+1 | tokens <= t)
  std::vector<double> ppl;       // [tokens - 1]: running perplexity exp(mean nll[0..t])
  std::vector<int64_t> entries;  // [tokens]: cache entries held after row t (layers x KV heads)
  std::vector<double> bytes;     // [tokens]: bytes the cache's K/V rows had allocated then,
                                 // in the policy's format (KvCache::bytes(), measured)
  std::vector<double> seconds;   // [tokens]: time of the pass that read token t (the prefill's
                                 // time on its last row, 0 on the others)
  double policy_seconds = 0;     // of all passes: eviction, rotation and quantisation
  double total_seconds = 0;
  std::vector<float> logits;                // [tokens, vocab] when keep_logits
  std::vector<models::KvSnapshot> history;  // after every pass when record_cache

  // Mean NLL and perplexity over rows [from, to) of nll (clamped to what was read).
  double mean_nll(int from = 0, int to = 1 << 30) const;
  double perplexity(int from = 0, int to = 1 << 30) const;
  // Mean time of the one-token steps (the prefill excluded).
  double step_seconds() const;
};

struct StreamResult {
  std::string model;       // as given
  std::string model_type;  // "gpt2", "llama", ...
  int context = 0;         // the model's max_position_embeddings (0 = none)
  int vocab = 0;
  int prefill = 1;
  std::vector<int32_t> ids;  // the stream
  std::vector<PolicyRun> runs;
};

// Streams `ids` under every policy. Throws Error(Unsupported) for a model that cannot decode,
// Error(InvalidArgument) for fewer than 2 tokens, a prefill outside [1, tokens] or a bad policy
// spec (checked before any work); a policy that stops mid-stream (kv_full at a learned-position
// model's context) keeps what it read, with the reason in `error`.
StreamResult run_stream(const models::Model& model, const std::string& model_name,
                        const std::vector<int32_t>& ids, const StreamOptions& opt);

// Every token of `text` with the model's tokenizer, not cut to the context (a stream is meant
// to be longer); Error(InvalidArgument) without a tokenizer or for empty text.
std::vector<int32_t> tokenize_stream(const models::Model& model, const std::string& text);

// JSON (version 1): model, context, prefill, tokens, and per policy its curves and summary.
nlohmann::json stream_json(const StreamResult& r);
// CSV, one row per policy and token: policy,token,nll,ppl,entries,bytes,seconds.
void write_stream_csv(const StreamResult& r, const std::string& path);
// DIR/<i>/ per policy (command-line order, 0-based): spec.txt, logits.npy f32 [T, V] (needs
// keep_logits), nll.npy f32 [T - 1].
void write_stream_dump(const StreamResult& r, const std::string& dir);

// Sampling for generate(): temperature 0 is greedy; top_k 0 and top_p 1 keep every token.
struct SamplingOptions {
  double temperature = 1.0;
  int top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  int max_new_tokens = 64;
  int stop_id = -1;  // stops after sampling this id (the tokenizer's end of text), -1 none
};

struct Generation {
  std::vector<int32_t> ids;    // the new tokens
  std::vector<float> logprob;  // log p of each sampled token (under the unmodified distribution)
  double seconds_per_token = 0;
  int64_t entries = 0;  // cache entries at the end
  double bytes = 0;
};

// Samples a continuation of `prompt` with the policy; `on_token` (may be empty) sees each new
// id as it is chosen. Throws like run_stream.
Generation generate(const models::Model& model, const std::vector<int32_t>& prompt,
                    const std::string& policy, const SamplingOptions& s, int threads = 0,
                    const std::function<void(int32_t)>& on_token = {});

// -log softmax(logits)[target], in double.
double token_nll(const float* logits, int vocab, int target);

// The sampling rule alone (exposed for tests): the index drawn from `logits` given a uniform
// draw u in [0, 1).
int32_t sample_token(const float* logits, int vocab, const SamplingOptions& s, double u);

}  // namespace attn::core
