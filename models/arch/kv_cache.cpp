#include "models/arch/kv_cache.h"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>

#include "compute/error.h"
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
  const int hkv = c.n_kv_heads, d = c.head_dim, old = c.capacity;
  const auto regrow = [&](auto& t, int width) {
    if (t.empty()) return;
    std::remove_reference_t<decltype(t)> g(size_t(hkv) * cap * width);
    for (int h = 0; h < hkv; ++h)
      std::copy_n(t.data() + size_t(h) * old * width, size_t(old) * width,
                  g.data() + size_t(h) * cap * width);
    t.swap(g);
  };
  for (KvLayer& L : c.layers) {
    regrow(L.k, d);
    regrow(L.v, d);
    regrow(L.k_raw, d);
    regrow(L.order, 1);
    regrow(L.pos, 1);
    regrow(L.kpos, 1);
    regrow(L.acc, 1);
  }
  c.capacity = cap;
}

// KIVI's per-channel groups: once `group` entries beyond the quantised ones exist (in stream
// order), each channel of those entries shares a minimum and scale; the newest incomplete group
// stays in full precision. `rows` holds the head's rows, `order` its rows in stream order.
// Returns the first entry that changed (or `len` when none did).
int quantise_channels(const KvStorage& s, bool key, float* rows, const int32_t* order, int len,
                      int d, int& done) {
  const int first = done;
  const int group = s.channel_group(key);
  std::vector<float> col(static_cast<size_t>(group));
  while (len - done >= group) {
    for (int c = 0; c < d; ++c) {
      for (int j = 0; j < group; ++j) col[size_t(j)] = rows[size_t(order[done + j]) * d + c];
      s.store_channel(col.data(), group);
      for (int j = 0; j < group; ++j) rows[size_t(order[done + j]) * d + c] = col[size_t(j)];
    }
    done += group;
  }
  return done > first ? first : len;
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
  if (L.len + n > c.capacity) grow(c, std::max({L.len + n, 2 * c.capacity, 64}));
  const int cap = c.capacity;
  const auto alloc = [&](auto& t, int width) {
    if (t.empty()) t.assign(size_t(hkv) * cap * width, {});
  };
  alloc(L.k, d);
  alloc(L.v, d);
  alloc(L.order, 1);
  alloc(L.pos, 1);
  alloc(L.kpos, 1);
  alloc(L.acc, 1);
  if (rotary) alloc(L.k_raw, d);
  if (L.quantised.empty()) L.quantised.assign(size_t(hkv), 0);
  if (L.vquantised.empty()) L.vquantised.assign(size_t(hkv), 0);
  return L;
}

// Appends p's n new keys and values (f32 [H_kv, n, d]) after each head's last rows, in the
// storage precision (rounded per token, then per channel once a group completes). Keys of
// rotary models go to k_raw, unrotated; a key whose stored value changed is marked unrotated.
void append_entries(const KvCache& c, KvLayer& L, const Problem& p, bool rotary) {
  const int n = p.n_q, d = p.d, hkv = p.n_kv_heads, cap = c.capacity;
  const int len0 = L.len, len = len0 + n;
  const KvStorage& store = *c.policy.storage;
  const bool per_channel_k = store.channel_group(true) > 0;
  const bool per_channel_v = store.channel_group(false) > 0;
  for (int h = 0; h < hkv; ++h) {
    float* stored_k = (rotary ? L.k_raw : L.k).data() + size_t(h) * cap * d;
    float* v = L.v.data() + size_t(h) * cap * d;
    // New entries take the rows after the last ones, in stream order.
    std::copy_n(p.k.data() + size_t(h) * n * d, size_t(n) * d, stored_k + size_t(len0) * d);
    std::copy_n(p.v.data() + size_t(h) * n * d, size_t(n) * d, v + size_t(len0) * d);
    store.store_rows(stored_k + size_t(len0) * d, n, d, true);
    store.store_rows(v + size_t(len0) * d, n, d, false);
    int32_t* order = L.order.data() + size_t(h) * cap;
    int32_t* pos = L.pos.data() + size_t(h) * cap;
    int32_t* kpos = L.kpos.data() + size_t(h) * cap;
    for (int i = 0; i < n; ++i) {
      order[len0 + i] = len0 + i;
      pos[len0 + i] = c.length + i;
      kpos[len0 + i] = -1;  // not rotated yet
      L.acc[size_t(h) * cap + len0 + i] = 0;
    }
    if (per_channel_k) {
      const int changed =
          quantise_channels(store, true, stored_k, order, len, d, L.quantised[size_t(h)]);
      for (int e = changed; e < len; ++e) kpos[order[e]] = -1;
    }
    if (per_channel_v) quantise_channels(store, false, v, order, len, d, L.vquantised[size_t(h)]);
  }
  L.len = len;
}

// Rotates every cached key whose position changed (from k_raw) and p's n queries to their
// positions: slots (an entry's rank in stream order) when repositioning, else stream
// positions. `len0` is the entries held before this step's.
void rotate_to_positions(const KvCache& c, KvLayer& L, Problem& p, const Rope& rope, int len0) {
  const int n = p.n_q, d = p.d, hkv = p.n_kv_heads, H = p.n_heads, cap = c.capacity;
  const int len = L.len;
  const bool slots = c.policy.reposition;
  std::vector<int32_t> qpos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) qpos[size_t(i)] = slots ? len0 + i : c.length + i;
  const int32_t longest = qpos.back() + 1;
  for (int h = 0; h < hkv; ++h) {
    const float* raw = L.k_raw.data() + size_t(h) * cap * d;
    float* k = L.k.data() + size_t(h) * cap * d;
    const int32_t* order = L.order.data() + size_t(h) * cap;
    const int32_t* pos = L.pos.data() + size_t(h) * cap;
    int32_t* kpos = L.kpos.data() + size_t(h) * cap;
    for (int e = 0; e < len; ++e) {
      const int r = order[e];
      const int32_t target = slots ? e : pos[r];
      if (kpos[r] == target) continue;
      std::copy_n(raw + size_t(r) * d, d, k + size_t(r) * d);
      rope.apply_at(k + size_t(r) * d, 1, &target, longest);
      kpos[r] = target;
    }
  }
  for (int h = 0; h < H; ++h)
    rope.apply_at(p.q.data() + size_t(h) * n * d, n, qpos.data(), longest);
}

// A selecting policy (kv_quest): the entries (ranks in stream order) each KV head's queries
// attend to.
std::vector<std::vector<int>> select_entries(const KvCache& c, const KvLayer& L, const Problem& p) {
  const int d = p.d, hkv = p.n_kv_heads, G = p.n_heads / hkv, cap = c.capacity, len = L.len;
  std::vector<std::vector<int>> pick(static_cast<size_t>(hkv));
  std::vector<float> keys(size_t(len) * d);
  for (int h = 0; h < hkv; ++h) {
    const int32_t* order = L.order.data() + size_t(h) * cap;
    const float* k = L.k.data() + size_t(h) * cap * d;
    for (int e = 0; e < len; ++e)
      std::copy_n(k + size_t(order[e]) * d, d, keys.data() + size_t(e) * d);
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

// Gives p the nk attended keys and values of each KV head, in stream order.
void gather_entries(const KvCache& c, const KvLayer& L, Problem& p,
                    const std::vector<std::vector<int>>& pick, bool selecting, int nk) {
  const int d = p.d, hkv = p.n_kv_heads, cap = c.capacity;
  AlignedFloats k(size_t(hkv) * nk * d), v(k.size());
  for (int h = 0; h < hkv; ++h) {
    const float* ck = L.k.data() + size_t(h) * cap * d;
    const float* cv = L.v.data() + size_t(h) * cap * d;
    float* dk = k.data() + size_t(h) * nk * d;
    float* dv = v.data() + size_t(h) * nk * d;
    for (int j = 0; j < nk; ++j) {
      const int r = attended_row(c, L, pick, selecting, h, j);
      std::copy_n(ck + size_t(r) * d, d, dk + size_t(j) * d);
      std::copy_n(cv + size_t(r) * d, d, dv + size_t(j) * d);
    }
  }
  p.k.swap(k);
  p.v.swap(v);
  p.n_k = nk;  // default positions: the queries are the last n of the nk entries
}

}  // namespace

int64_t KvCache::entries() const {
  int64_t e = 0;
  for (const KvLayer& L : layers) e += int64_t(L.len) * n_kv_heads;
  return e;
}

double KvCache::bytes() const {
  const double per =
      (policy.key_bytes_per_element(head_dim) + policy.value_bytes_per_element(head_dim)) *
      head_dim;
  return double(entries()) * per;
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
  append_entries(c, L, p, rope != nullptr);
  if (rope) rotate_to_positions(c, L, p, *rope, len0);
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
  const int len = L.len, d = p.d, H = p.n_heads, G = H / p.n_kv_heads, cap = c.capacity;
  const float scale = p.effective_scale();
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  parallel_for(
      H,
      [&](int h) {
        const int g = h / G;
        Eigen::Map<const RowMat> K(L.k.data() + size_t(g) * cap * d, len, d);
        Eigen::Map<const RowMat> V(L.v.data() + size_t(g) * cap * d, len, d);
        Eigen::Map<const Eigen::VectorXf> q(p.q.data() + size_t(h) * d, d);
        Eigen::VectorXf s = (K * q) * scale;  // every row is visible: the query is the newest
        s = (s.array() - s.maxCoeff()).exp();
        s /= s.sum();
        Eigen::Map<Eigen::VectorXf>(out + size_t(h) * d, d).noalias() = V.transpose() * s;
        if (probs) {
          const int32_t* order = L.order.data() + size_t(g) * cap;
          float* dst = probs + size_t(h) * len;
          for (int e = 0; e < len; ++e) dst[e] = s[order[e]];
        }
      },
      threads);
}

void kv_end_layer(KvCache& c, int layer, int n_layers, const Problem& p, const float* pattern) {
  const KvPolicy& pol = c.policy;
  if (!pol.evict->evicts()) return;
  require(!pol.needs_scores() || pattern, ErrorCode::InvalidArgument,
          pol.spec + ": eviction needs the attention probabilities");
  const auto t0 = Clock::now();
  KvLayer& L = c.layers[size_t(layer)];
  const int hkv = c.n_kv_heads, d = c.head_dim, cap = c.capacity, len = L.len;
  const int G = p.n_heads / hkv, n = p.n_q;
  int kept = -1;
  std::vector<char> gone;
  std::vector<int32_t> moved_to;
  for (int h = 0; h < hkv; ++h) {
    int32_t* order = L.order.data() + size_t(h) * cap;
    KvHeadState st;
    st.pos.resize(size_t(len));
    st.acc.resize(size_t(len));
    for (int e = 0; e < len; ++e) {
      st.pos[size_t(e)] = L.pos[size_t(h) * cap + order[e]];
      st.acc[size_t(e)] = L.acc[size_t(h) * cap + order[e]];
    }
    const float* probs = pattern ? pattern + size_t(h) * G * n * len : nullptr;
    const std::vector<int> keep = kv_keep(pol, layer, n_layers, st, probs, G, n, c.passes == 0);
    require(kept < 0 || kept == int(keep.size()), ErrorCode::InvalidArgument,
            pol.spec + ": KV heads of one layer kept different counts");
    kept = int(keep.size());
    for (size_t j = 0; j < keep.size(); ++j)  // accumulated scores back to their rows
      L.acc[size_t(h) * cap + order[keep[j]]] = st.acc[size_t(keep[j])];
    if (kept == len) continue;
    // Rows of evicted entries below `kept` take the kept rows from `kept` up, so rows
    // 0..kept-1 stay dense; nothing else moves.
    gone.assign(size_t(len), 1);
    for (int e : keep) gone[size_t(order[e])] = 0;
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
      move_row(L.k.data(), d, r, to);
      move_row(L.v.data(), d, r, to);
      if (!L.k_raw.empty()) move_row(L.k_raw.data(), d, r, to);
      move_row(L.pos.data(), 1, r, to);
      move_row(L.kpos.data(), 1, r, to);
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
