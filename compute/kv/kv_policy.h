// KV-cache policies for incremental decoding: which keys and values a causal model keeps
// (eviction), in what precision it stores them, and which positions kept tokens take.
//
// A policy is written like a variant: pieces joined by '+', at most one eviction piece (default
// kv_full) and one precision piece (default: f32), e.g.
//   "kv_streaming(sinks=4,window=252)"   "kv_h2o(budget=128,recent=32)+kv_quant(bits=4)"
//   "kv_fp8(format=e4m3)"                "kv_recent(window=64,reposition=false)"
// The pieces are the entries of one table (compute/kv/kv_pieces.h); `attnscope variants --kv`
// lists them with their parameters and sources.
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
#include <memory>
#include <string>
#include <vector>

#include "compute/kv/kv_rows.h"
#include "compute/variant.h"

namespace attn {

struct KvHeadState;  // compute/kv/kv_evict.h

// An eviction piece with its parameters: which entries one KV head of one layer keeps.
class KvEviction {
 public:
  virtual ~KvEviction() = default;
  // False when no entry is ever dropped (kv_full, for one): the cache grows with the stream.
  virtual bool evicts() const { return true; }
  // True when eviction reads attention probabilities (kv_h2o, for one).
  virtual bool needs_scores() const { return false; }
  // True when eviction happens once, after the prefill (kv_snapkv, for one).
  virtual bool prefill_only() const { return false; }
  // Entries layer `layer` (of n_layers) keeps once a step (or the prefill) has attended, ready
  // for the next token; -1 = no bound (a piece that never evicts). A prefill-only piece bounds its
  // one compression; decoding then appends.
  virtual int keep_after(int layer, int n_layers) const;
  // The entries to keep after a pass attended, as kv_keep (compute/kv/kv_evict.h) documents;
  // called with at least one entry. Default: every entry.
  virtual std::vector<int> keep(int layer, int n_layers, KvHeadState& st, const float* probs, int G,
                                int nq, bool first_pass) const;
  // True when a decode step attends to entries it picks rather than the whole cache (kv_quest).
  virtual bool selects() const { return false; }
  // The entries a decode step attends to, as kv_select (compute/kv/kv_evict.h) documents.
  // Default: every entry.
  virtual std::vector<int> select(const float* q, int G, const float* keys, int n, int d) const;
};

// A storage (precision) piece with its parameters: the format a cached K or V is stored in
// (the cache's rows, compute/kv/kv_rows.h, hold those bytes) and, as f32 round trips, what an
// element decodes to.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  // True when the stored values are the f32 ones (nothing rounded).
  virtual bool exact() const { return false; }
  // The format K (`key`) or V is stored in.
  virtual KvFormat format(bool key) const = 0;
  // Nominal bytes one cached element of K (`key`) or V takes in that format, with its share of
  // any group minimum and scale (f32 each); what a cache allocated is KvCache::bytes().
  virtual double bytes_per_element(bool key, int head_dim) const = 0;
  // Rounds n new rows f32 [n, d] of K (`key`) or V to what the cache holds; leaves them alone
  // when that tensor is quantised in per-channel groups (channel_group > 0).
  virtual void store_rows(float* x, int n, int d, bool key) const = 0;
  // Tokens per group when K (`key`) or V is quantised per channel along tokens (KIVI's keys);
  // 0 = stored token by token (store_rows).
  virtual int channel_group(bool key) const {
    (void)key;
    return 0;
  }
  // Rounds one channel's completed group (n = channel_group(key) values, in stream order).
  virtual void store_channel(float* col, int n) const {
    (void)col;
    (void)n;
  }
};

struct KvPolicy {
  KvPolicy();  // kv_full, f32

  std::string spec = "kv_full";  // canonical text (every parameter spelled out)
  bool reposition = true;
  std::string evict_id = "kv_full";          // the eviction piece
  std::string storage_id;                    // the precision piece; empty = f32
  Params evict_params, storage_params;       // the pieces' resolved parameters
  std::shared_ptr<const KvEviction> evict;   // never null
  std::shared_ptr<const KvStorage> storage;  // never null

  bool needs_scores() const { return evict->needs_scores(); }
  bool prefill_only() const { return evict->prefill_only(); }
  int keep_after(int layer, int n_layers) const { return evict->keep_after(layer, n_layers); }
  // Nominal bytes one cached element of K or V takes in this precision (kv_quant: bits/8 plus
  // its share of the group's minimum and scale, 4 bytes each).
  double key_bytes_per_element(int head_dim) const {
    return storage->bytes_per_element(true, head_dim);
  }
  double value_bytes_per_element(int head_dim) const {
    return storage->bytes_per_element(false, head_dim);
  }
};

// Every KV piece of the table (eviction first, then precision), with schemas and sources.
const std::vector<VariantInfo>& kv_pieces();

// Parses a policy. Throws Error(UnknownVariant) for an unknown piece, Error(BadParameter) for an
// out-of-range or unknown parameter (and budget < recent, window > budget and the like), and
// Error(InvalidArgument) for two eviction or two precision pieces or malformed text.
KvPolicy make_kv_policy(const std::string& spec);

}  // namespace attn
