#include "models/arch/kv_cache.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "compute/error.h"
#include "compute/kv/kv_attend.h"
#include "compute/kv/kv_evict.h"
#include "compute/parallel.h"
#include "compute/problem.h"
#include "models/arch/rope.h"

namespace attn::models {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Grows every layer to `cap` rows per head, keeping each head's rows.
void grow(KvCache& c, int cap) {
  const int hkv = c.n_kv_heads, old = c.capacity;
  const auto regrow = [&](auto& t) {
    if (t.empty()) return;
    std::remove_reference_t<decltype(t)> g(size_t(hkv) * cap);
    for (int h = 0; h < hkv; ++h)
      std::copy_n(t.data() + size_t(h) * old, size_t(old), g.data() + size_t(h) * cap);
    t.swap(g);
  };
  for (KvLayer& L : c.layers) {
    if (L.k.heads() > 0) L.k.reserve(cap);
    if (L.v.heads() > 0) L.v.reserve(cap);
    regrow(L.order);
    regrow(L.pos);
    regrow(L.target);
    regrow(L.acc);
  }
  c.capacity = cap;
}

// Checks the cache holds p's model (sizing it on the first call), grows every layer to take
// n more entries and allocates `layer`'s rows on first use. Returns `layer`.
KvLayer& prepare_layer(KvCache& c, int layer, int n_layers, const Problem& p, bool rotary) {
  const int n = p.n_q, d = p.d, hkv = p.n_kv_heads;
  if (c.layers.empty()) {
    c.layers.resize(size_t(n_layers));
    c.n_kv_heads = hkv;
    c.head_dim = d;
  }
  require(c.n_kv_heads == hkv && c.head_dim == d && int(c.layers.size()) == n_layers,
          ErrorCode::InvalidArgument, "KV cache: it holds another model's keys and values");
  KvLayer& L = c.layers[size_t(layer)];
  if (L.k.heads() == 0) {
    L.k = KvRows(c.policy.storage->format(true), hkv, d);
    L.v = KvRows(c.policy.storage->format(false), hkv, d);
    L.k.reserve(c.capacity);
    L.v.reserve(c.capacity);
  }
  if (L.len + n > c.capacity) grow(c, std::max({L.len + n, 2 * c.capacity, 64}));
  const int cap = c.capacity;
  const auto alloc = [&](auto& t) {
    if (t.empty()) t.assign(size_t(hkv) * cap, {});
  };
  alloc(L.order);
  alloc(L.pos);
  alloc(L.acc);
  if (rotary) alloc(L.target);
  if (L.quantised.empty()) L.quantised.assign(size_t(hkv), 0);
  if (L.vquantised.empty()) L.vquantised.assign(size_t(hkv), 0);
  return L;
}

// KIVI's per-channel groups: once `group` entries beyond the sealed ones exist (in stream
// order), their rows are quantised together, each channel with its own minimum and scale; the
// newest incomplete group waits in f32.
void seal_groups(KvRows& rows, int h, const int32_t* order, int len, int& done) {
  const int group = rows.format().group;
  while (len - done >= group) {
    rows.seal(h, order + done, group);
    done += group;
  }
}

// Appends p's n new keys and values (f32 [H_kv, n, d]) after each head's last rows, in the
// storage format (per-channel groups sealed as they fill, one new row at a time, so at most a
// group's rows ever wait in f32).
void append_entries(const KvCache& c, KvLayer& L, const Problem& p) {
  const int n = p.n_q, d = p.d, hkv = p.n_kv_heads, cap = c.capacity;
  const int len0 = L.len;
  const bool per_channel_k = L.k.format().per_channel, per_channel_v = L.v.format().per_channel;
  for (int h = 0; h < hkv; ++h) {
    int32_t* order = L.order.data() + size_t(h) * cap;
    int32_t* pos = L.pos.data() + size_t(h) * cap;
    for (int i = 0; i < n; ++i) {
      order[len0 + i] = len0 + i;
      pos[len0 + i] = c.length + i;
      L.acc[size_t(h) * cap + len0 + i] = 0;
    }
    const float* k = p.k.data() + size_t(h) * n * d;
    const float* v = p.v.data() + size_t(h) * n * d;
    if (!per_channel_k && !per_channel_v) {
      L.k.write(h, len0, k, n);
      L.v.write(h, len0, v, n);
      continue;
    }
    for (int i = 0; i < n; ++i) {
      L.k.write(h, len0 + i, k + size_t(i) * d, 1);
      L.v.write(h, len0 + i, v + size_t(i) * d, 1);
      if (per_channel_k) seal_groups(L.k, h, order, len0 + i + 1, L.quantised[size_t(h)]);
      if (per_channel_v) seal_groups(L.v, h, order, len0 + i + 1, L.vquantised[size_t(h)]);
    }
  }
  L.len = len0 + n;
}

// Extends the cache's rotary table to positions 0 .. last under the frequencies Rope::apply_at
// uses for a sequence of `length` tokens (rebuilt when they change: "dynamic" scaling).
void ensure_rope_table(KvCache& c, const Rope& rope, int length, int last) {
  const int d = c.head_dim, half = d / 2;
  std::vector<float> f = rope.inv_freq(length);
  if (f != c.rope_freq) {
    c.rope_table.clear();
    c.rope_freq = std::move(f);
  }
  const int have = int(c.rope_table.size() / size_t(d));
  if (last < have) return;
  c.rope_table.resize(size_t(last + 1) * d);
  for (int t = have; t <= last; ++t) {
    float* row = c.rope_table.data() + size_t(t) * d;
    for (int i = 0; i < half; ++i) {
      const float angle = float(t) * c.rope_freq[size_t(i)];  // as Rope::apply_at
      row[i] = std::cos(angle);
      row[half + i] = std::sin(angle);
    }
  }
}

// Rotary models: sets the position each cached key is rotated to (slots, i.e. an entry's rank
// in stream order, when repositioning, else stream positions), makes the table cover them and
// rotates p's n queries to theirs. `len0` is the entries held before this step's.
void set_positions(KvCache& c, KvLayer& L, Problem& p, const Rope& rope, int len0) {
  const int n = p.n_q, d = p.d, hkv = p.n_kv_heads, H = p.n_heads, cap = c.capacity;
  const bool slots = c.policy.reposition;
  std::vector<int32_t> qpos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) qpos[size_t(i)] = slots ? len0 + i : c.length + i;
  const int32_t longest = qpos.back() + 1;
  int32_t last = longest - 1;
  for (int h = 0; h < hkv; ++h) {
    const int32_t* order = L.order.data() + size_t(h) * cap;
    const int32_t* pos = L.pos.data() + size_t(h) * cap;
    int32_t* target = L.target.data() + size_t(h) * cap;
    for (int e = 0; e < L.len; ++e) {
      const int r = order[e];
      target[r] = slots ? e : pos[r];
      last = std::max(last, target[r]);
    }
  }
  ensure_rope_table(c, rope, longest, last);
  for (int h = 0; h < H; ++h)
    rope.apply_at(p.q.data() + size_t(h) * n * d, n, qpos.data(), longest);
}

// Rows idx[0 .. n - 1] of KV head h's keys as attention reads them, f32 [n, d]: decoded, and
// rotated to their targets.
void read_keys(const KvCache& c, const KvLayer& L, int h, const int32_t* idx, int n, float* out) {
  kv_decode_rows(L.k, h, idx, n, out);
  if (L.target.empty()) return;
  const int d = c.head_dim, half = d / 2;
  for (int j = 0; j < n; ++j) {
    float* x = out + size_t(j) * d;
    const float* cs = c.rope_table.data() + size_t(L.target[size_t(h) * c.capacity + idx[j]]) * d;
    for (int i = 0; i < half; ++i) {  // as the decode kernel rotates a key it reads
      const float a = x[i], b = x[i + half], co = cs[i], sn = cs[half + i];
      x[i] = std::fma(a, co, -(b * sn));
      x[i + half] = std::fma(b, co, a * sn);
    }
  }
}

// A selecting policy (kv_quest): the entries (ranks in stream order) each KV head's queries
// attend to.
std::vector<std::vector<int>> select_entries(const KvCache& c, const KvLayer& L, const Problem& p) {
  const int d = p.d, hkv = p.n_kv_heads, G = p.n_heads / hkv, cap = c.capacity, len = L.len;
  std::vector<std::vector<int>> pick(static_cast<size_t>(hkv));
  std::vector<float> keys(size_t(len) * d);
  for (int h = 0; h < hkv; ++h) {
    read_keys(c, L, h, L.order.data() + size_t(h) * cap, len, keys.data());
    pick[size_t(h)] = kv_select(c.policy, p.q.data() + size_t(h) * G * d, G, keys.data(), len, d);
  }
  return pick;
}

// The row of each KV head's j-th attended entry: the j-th in stream order, or its j-th pick.
int attended_row(const KvCache& c, const KvLayer& L, const std::vector<std::vector<int>>& pick,
                 bool selecting, int h, int j) {
  const int32_t* order = L.order.data() + size_t(h) * c.capacity;
  return order[selecting ? pick[size_t(h)][size_t(j)] : j];
}

// While recording: the stream positions each KV head's queries attend, for the pass's snapshot.
void record_attending(KvCache& c, const KvLayer& L, int layer, int n_layers,
                      const std::vector<std::vector<int>>& pick, bool selecting, int nk) {
  c.attending.resize(size_t(n_layers));
  auto& heads = c.attending[size_t(layer)];
  heads.assign(size_t(c.n_kv_heads), {});
  for (int h = 0; h < c.n_kv_heads; ++h) {
    const int32_t* pos = L.pos.data() + size_t(h) * c.capacity;
    for (int j = 0; j < nk; ++j)
      heads[size_t(h)].push_back(pos[attended_row(c, L, pick, selecting, h, j)]);
  }
}

// Gives p the nk attended keys (rotated) and values of each KV head, in stream order, decoded.
void gather_entries(const KvCache& c, const KvLayer& L, Problem& p,
                    const std::vector<std::vector<int>>& pick, bool selecting, int nk) {
  const int d = p.d, hkv = p.n_kv_heads;
  AlignedFloats k(size_t(hkv) * nk * d), v(k.size());
  std::vector<int32_t> rows(static_cast<size_t>(nk));
  for (int h = 0; h < hkv; ++h) {
    for (int j = 0; j < nk; ++j) rows[size_t(j)] = attended_row(c, L, pick, selecting, h, j);
    read_keys(c, L, h, rows.data(), nk, k.data() + size_t(h) * nk * d);
    kv_decode_rows(L.v, h, rows.data(), nk, v.data() + size_t(h) * nk * d);
  }
  p.k.swap(k);
  p.v.swap(v);
  p.n_k = nk;  // default positions: the queries are the last n of the nk entries
}

template <class T>
double allocated(const std::vector<T>& v) {
  return double(v.capacity() * sizeof(T));
}

}  // namespace

int64_t KvCache::entries() const {
  int64_t e = 0;
  for (const KvLayer& L : layers) e += int64_t(L.len) * n_kv_heads;
  return e;
}

double KvCache::bytes() const {
  double b = 0;
  for (const KvLayer& L : layers) b += double(L.k.bytes() + L.v.bytes());
  return b;
}

double KvCache::bookkeeping_bytes() const {
  double b = allocated(rope_table) + allocated(rope_freq) + allocated(layers);
  for (const KvLayer& L : layers)
    b += allocated(L.order) + allocated(L.pos) + allocated(L.target) + allocated(L.acc) +
         allocated(L.quantised) + allocated(L.vquantised);
  return b;
}

std::vector<int> kv_input_positions(const KvCache& c, int n, int max_positions) {
  int slot = 0;
  for (const KvLayer& L : c.layers) slot = std::max(slot, L.len);
  const bool evicts = c.policy.evict->evicts();
  const int base = c.policy.reposition && evicts ? slot : c.length;
  std::vector<int> pos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) pos[size_t(i)] = base + i;
  if (max_positions > 0 && n > 0 && int64_t(base) + n > max_positions)
    throw Error(ErrorCode::InvalidArgument,
                "token " + std::to_string(c.length + n - 1) + " would take position " +
                    std::to_string(base + n - 1) + ", past the model's context of " +
                    std::to_string(max_positions) + " learned positions, under " + c.policy.spec +
                    (evicts ? (c.policy.prefill_only()
                                   ? " (it compresses the prompt once, then keeps every token)"
                                   : "")
                            : " (an evicting policy with reposition=true can stream on)"));
  return pos;
}

bool kv_begin_layer(KvCache& c, int layer, int n_layers, Problem& p, const Rope* rope,
                    bool gather) {
  const int n = p.n_q;
  KvLayer& L = prepare_layer(c, layer, n_layers, p, rope != nullptr);
  const auto t0 = Clock::now();
  const int len0 = L.len;
  append_entries(c, L, p);
  if (rope) set_positions(c, L, p, *rope, len0);
  const bool selecting = c.policy.evict->selects() && n == 1 && c.passes > 0;
  std::vector<std::vector<int>> pick;
  int nk = L.len;
  if (selecting) {
    pick = select_entries(c, L, p);
    nk = int(pick[0].size());
  }
  c.policy_seconds += since(t0);
  if (c.record) record_attending(c, L, layer, n_layers, pick, selecting, nk);
  if (!gather && !selecting && n == 1) return false;  // kv_attend reads the rows in place
  gather_entries(c, L, p, pick, selecting, nk);
  return true;
}

int kv_layer_length(const KvCache& c, int layer) {
  return c.layers.empty() ? 0 : c.layers[size_t(layer)].len;
}

void kv_attend(const KvCache& c, int layer, const Problem& p, float* out, float* probs,
               int threads) {
  require(p.n_q == 1, ErrorCode::InvalidArgument, "KV cache: in-place attention takes one query");
  const KvLayer& L = c.layers[size_t(layer)];
  const int len = L.len, H = p.n_heads, G = H / p.n_kv_heads, cap = c.capacity;
  KvRope rope;
  if (!L.target.empty()) rope = {c.rope_table.data(), L.target.data(), cap};
  std::vector<float> by_row(probs ? size_t(H) * len : 0);  // f32 [H, len] by physical row
  kv_attend_rows(L.k, L.v, len, p.q.data(), H, p.effective_scale(),
                 L.target.empty() ? nullptr : &rope, out, probs ? by_row.data() : nullptr, threads);
  if (!probs) return;
  for (int h = 0; h < H; ++h) {
    const int32_t* order = L.order.data() + size_t(h / G) * cap;
    const float* src = by_row.data() + size_t(h) * len;
    float* dst = probs + size_t(h) * len;
    for (int e = 0; e < len; ++e) dst[e] = src[order[e]];
  }
}

void kv_end_layer(KvCache& c, int layer, int n_layers, const Problem& p, const float* pattern) {
  const KvPolicy& pol = c.policy;
  if (!pol.evict->evicts()) return;
  require(!pol.needs_scores() || pattern, ErrorCode::InvalidArgument,
          pol.spec + ": eviction needs the attention probabilities");
  const auto t0 = Clock::now();
  KvLayer& L = c.layers[size_t(layer)];
  const int hkv = c.n_kv_heads, cap = c.capacity, len = L.len;
  const int G = p.n_heads / hkv, n = p.n_q;
  int kept = -1;
  std::vector<char> gone;
  std::vector<int32_t> moved_to;
  // Accumulated scores only for policies that keep them (the others never read them): a step's
  // bookkeeping is a few passes over every entry of every head.
  const bool scores = pol.needs_scores();
  for (int h = 0; h < hkv; ++h) {
    int32_t* order = L.order.data() + size_t(h) * cap;
    KvHeadState st;
    st.pos.resize(size_t(len));
    for (int e = 0; e < len; ++e) st.pos[size_t(e)] = L.pos[size_t(h) * cap + order[e]];
    if (scores) {
      st.acc.resize(size_t(len));
      for (int e = 0; e < len; ++e) st.acc[size_t(e)] = L.acc[size_t(h) * cap + order[e]];
    }
    const float* probs = pattern ? pattern + size_t(h) * G * n * len : nullptr;
    const std::vector<int> keep = kv_keep(pol, layer, n_layers, st, probs, G, n, c.passes == 0);
    require(kept < 0 || kept == int(keep.size()), ErrorCode::InvalidArgument,
            pol.spec + ": KV heads of one layer kept different counts");
    kept = int(keep.size());
    if (scores)
      for (size_t j = 0; j < keep.size(); ++j)  // accumulated scores back to their rows
        L.acc[size_t(h) * cap + order[keep[j]]] = st.acc[size_t(keep[j])];
    if (kept == len) continue;
    // Rows of evicted entries below `kept` take the kept rows from `kept` up, so rows
    // 0..kept-1 stay dense; nothing else moves.
    gone.assign(size_t(len), 1);
    for (int e : keep) gone[size_t(order[e])] = 0;
    for (int r = 0; r < len; ++r) {
      if (!gone[size_t(r)]) continue;
      L.k.release(h, r);
      L.v.release(h, r);
    }
    moved_to.assign(size_t(len), -1);
    int hole = 0;
    for (int r = kept; r < len; ++r) {
      if (gone[size_t(r)]) continue;
      while (!gone[size_t(hole)]) ++hole;
      moved_to[size_t(r)] = hole++;
    }
    const auto move_row = [&](auto* base, int width, int from, int to) {
      std::copy_n(base + size_t(h) * cap * width + size_t(from) * width, width,
                  base + size_t(h) * cap * width + size_t(to) * width);
    };
    for (int r = kept; r < len; ++r) {
      const int to = moved_to[size_t(r)];
      if (to < 0) continue;
      L.k.move(h, r, to);
      L.v.move(h, r, to);
      move_row(L.pos.data(), 1, r, to);
      move_row(L.acc.data(), 1, r, to);
    }
    for (int j = 0; j < kept; ++j) {
      const int r = order[keep[size_t(j)]];
      order[j] = r >= kept ? moved_to[size_t(r)] : r;
    }
    for (int* q : {&L.quantised[size_t(h)], &L.vquantised[size_t(h)]})
      *q = int(std::lower_bound(keep.begin(), keep.end(), *q) - keep.begin());
  }
  L.len = kept;
  c.policy_seconds += since(t0);
}

void kv_end_pass(KvCache& c, int n) {
  c.length += n;
  c.passes += 1;
  if (!c.record) return;
  KvSnapshot s;
  s.step = c.length - 1;
  for (const KvLayer& L : c.layers) {
    std::vector<std::vector<int32_t>> heads;
    for (int h = 0; h < c.n_kv_heads; ++h) {
      std::vector<int32_t> kept(static_cast<size_t>(L.len));
      for (int e = 0; e < L.len; ++e)
        kept[size_t(e)] = L.pos[size_t(h) * c.capacity + L.order[size_t(h) * c.capacity + e]];
      heads.push_back(std::move(kept));
    }
    s.kept.push_back(std::move(heads));
    std::vector<int32_t> q(static_cast<size_t>(c.n_kv_heads), 0);
    const KvPolicy& pol = c.policy;
    for (int h = 0; h < c.n_kv_heads; ++h)
      q[size_t(h)] = pol.storage->exact()                   ? 0
                     : pol.storage->channel_group(true) > 0 ? L.quantised[size_t(h)]
                                                            : L.len;
    s.quantised.push_back(std::move(q));
  }
  s.attended = std::move(c.attending);
  c.attending.clear();
  c.history.push_back(std::move(s));
}

}  // namespace attn::models
