// The KV cache of incremental decoding (Model::decode) and the policy that runs it
// (compute/kv/kv_policy.h: eviction, storage precision, positions).
//
// Each layer holds, per KV head, `len` entries in physical rows 0..len-1: K and V in the
// policy's storage format (compute/kv/kv_rows.h: f32, bf16, f16, fp8 or packed int codes with
// their group minimum and scale), and the stream position of each row. Keys of rotary models
// are stored before rotation; attention rotates each one to its position as it reads it
// (compute/kv/kv_attend.h), so a key whose slot changes costs nothing to move. `order` lists the
// rows in stream order (the logical cache the policies reason about). Rows are not kept in
// stream order: evicting an entry moves the last row into its place, so a step costs
// O(evicted) instead of moving every later row (attention is the same whatever the order of its
// keys). Every head of a layer holds the same number of entries; layers may differ
// (kv_pyramidkv).
#pragma once
#include <cstdint>
#include <vector>

#include "compute/kv/kv_policy.h"
#include "compute/kv/kv_rows.h"

namespace attn {
struct Problem;
}  // namespace attn

namespace attn::models {

class Rope;

struct KvLayer {
  int len = 0;                  // entries held per head
  KvRows k, v;                  // [H_kv, capacity, d] in the storage format: what attention
                                // reads, by row (keys unrotated)
  std::vector<int32_t> order;   // i32 [H_kv, capacity]: rows in stream order
  std::vector<int32_t> pos;     // i32 [H_kv, capacity]: stream position of each row
  std::vector<int32_t> target;  // i32 [H_kv, capacity]: rotary models: the position each row's
                                // key is rotated to in this pass (its slot or stream position)
  std::vector<double> acc;      // f64 [H_kv, capacity]: kv_h2o's accumulated attention by row
  std::vector<int> quantised;   // [H_kv]: leading entries (stream order) whose K is quantised
                                // per channel (kv_quant)
  std::vector<int> vquantised;  // [H_kv]: the same for V (kv_quant(v_axis=channel))
};

// Cache state at the end of a pass (what the cache timeline shows).
struct KvSnapshot {
  int step = 0;  // stream position of the pass's last token
  // [layer][kv head]: stream positions held after eviction
  std::vector<std::vector<std::vector<int32_t>>> kept;
  // [layer][kv head]: stream positions the pass's last query attended, in stream order (what
  // the cache held before eviction, or kv_quest's pages); the attention pattern hook's last row
  // spans them in this order.
  std::vector<std::vector<std::vector<int32_t>>> attended;
  // [layer][kv head]: how many of `kept` (the first ones, in stream order) hold their key in
  // the storage precision rather than f32 (all of them for per-token and float formats; the
  // completed groups for kv_quant's per-channel keys; none for f32).
  std::vector<std::vector<int32_t>> quantised;
};

struct KvCache {
  KvPolicy policy;   // default: kv_full, f32
  int length = 0;    // tokens streamed so far (the next token's stream position)
  int passes = 0;    // passes run; the first is the prefill
  int capacity = 0;  // rows allocated per head
  int n_kv_heads = 0, head_dim = 0;
  std::vector<KvLayer> layers;
  bool record = false;              // keep a KvSnapshot per pass in `history`
  std::vector<KvSnapshot> history;  // filled when `record` is set
  // While recording: [layer][kv head] positions this pass's last query attends (kv_begin_layer).
  std::vector<std::vector<std::vector<int32_t>>> attending;
  double policy_seconds = 0;  // time spent on eviction, rotation and quantisation
  // Rotary models: f32 [positions, d], each position's cosines (d/2) then sines (d/2) under
  // the frequencies `rope_freq` (Rope::inv_freq of the pass), rows added as positions grow.
  std::vector<float> rope_table, rope_freq;

  KvCache() = default;
  explicit KvCache(KvPolicy p) : policy(std::move(p)) {}

  // Entries held, summed over layers and KV heads.
  int64_t entries() const;
  // Bytes allocated for the keys and values in the policy's storage format (codes, group
  // minimums and scales, rows waiting in f32), measured from the buffers: grows with the
  // allocated rows (capacity), not only the held ones.
  double bytes() const;
  // Bytes of the rest: row order, positions, scores and the rotary table.
  double bookkeeping_bytes() const;
};

// ---- what the architectures call (models/arch/*.cpp) ----

// Positions the n new tokens take in a learned-position model (GPT-2): their slot
// (reposition) or their stream position. Throws Error(InvalidArgument) when one reaches
// `max_positions`, naming the policy (kv_full and kv_quest stop at the context).
std::vector<int> kv_input_positions(const KvCache& cache, int n, int max_positions);

// Before layer `layer`'s attention: appends p's new keys and values (f32 [H_kv, n, d]; for
// rotary models q and k arrive unrotated and `rope` is non-null) in the storage format, rotates
// q to its position and sets the position each cached key is rotated to. With `gather`
// (attention hooks, a substituted variant), a prefill (n > 1) or kv_quest's page selection it
// gives p what its queries attend over (decoded to f32 and rotated), in stream order with the
// new tokens last, and returns true; otherwise p keeps only its query and kv_attend() reads the
// cache's bytes in place.
bool kv_begin_layer(KvCache& cache, int layer, int n_layers, Problem& p, const Rope* rope,
                    bool gather);
// Dense softmax attention of p's one query (the newest entry) over layer `layer`'s cache, in
// place, reading the stored format (compute/kv/kv_attend.h): out f32 [1, H*d]; probs (may be
// null) f32 [H, 1, len] in stream order.
void kv_attend(const KvCache& cache, int layer, const Problem& p, float* out, float* probs,
               int threads);
// Entries layer `layer` holds per head (what kv_attend's probs rows span).
int kv_layer_length(const KvCache& cache, int layer);
// After the attention: evicts by the policy. `pattern` f32 [H, n, len] holds the pass's
// attention probabilities in stream order (required when policy.needs_scores(), else may be
// null).
void kv_end_layer(KvCache& cache, int layer, int n_layers, const Problem& p, const float* pattern);
// After every layer ran: advances the stream and records the snapshot.
void kv_end_pass(KvCache& cache, int n);

}  // namespace attn::models
