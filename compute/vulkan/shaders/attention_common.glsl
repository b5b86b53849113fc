// Shared by the attention kernels: work split, buffers, the per-row state carried between
// dispatches, and the normalisers applied to one tile of scores at a time.
//
// Work split: a query row is owned by LANES adjacent invocations of one subgroup; lane l holds
// the vec4 chunks c*LANES + l of the row's q and output (interleaved, so the lanes of a row read
// adjacent shared-memory words). Dot products are reduced across the lanes with shuffles.
//
// Passes: softmax, sigmoid, ReLU and softplus need one pass over the keys. 1.5-entmax needs the
// row's threshold tau first: a pass for max z (z = s/2), ENT_PASSES passes that narrow a bracket
// around tau, then the output pass.
//
// Key chunks: one dispatch may cover only keys [key_begin, key_end) of some passes; the row state
// (running max and sum, entmax bracket, unnormalised output in O) is then stored in `state` and
// O between dispatches. lavapipe silently skips loop iterations past about 65k back-edges per
// invocation, so on CPU devices the host bounds the keys per dispatch, which bounds every loop.
//
// UNROLL_KEYS (a build-time define): 1 unrolls the loops over a tile's keys (GPUs: scores stay
// in registers); 0 keeps them as loops (lavapipe: compiling unrolled tiles takes seconds).

#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require

#if UNROLL_KEYS
#define KEY_LOOP [[unroll]]
#else
#define KEY_LOOP [[dont_unroll]]
#endif

layout(constant_id = 0) const uint D = 64;     // head dimension, padded to a multiple of 4*LANES
layout(constant_id = 1) const uint LANES = 4;  // invocations per query row (1, 2, 4 or 8)
layout(constant_id = 2) const uint ROWS = 32;  // query rows per workgroup
layout(constant_id = 3) const uint TILE = 32;  // keys per tile (8, 16 or 32)
layout(local_size_x_id = 15) in;  // ROWS * LANES

#include "score_functions.glsl"

const uint D4 = D / 4;               // vec4 chunks per row
const uint DL4 = D / (4 * LANES);    // vec4 chunks per lane
const float NEG_BIG = -3.0e38;       // "no key yet" (finite, so exp(m - m) stays 1)
// 1.5-entmax threshold search: ENT_PASSES passes each split the bracket into ENT_T parts.
const uint ENT_T = 16;
const uint ENT_PASSES = 3;
const uint EPL = ENT_T / LANES;      // thresholds per lane
const uint STATE = 8 + 3 * ENT_T;    // floats of carried state per row

#ifndef KV16
#define KV16 0
#endif
#if KV16
// Q, K and V stored in 16 bits (RunOptions::precision), four values per uvec2: bf16 or f16 by
// BF16, widened to f32 as they are loaded; scores, softmax and sums stay f32. Plain 32-bit
// loads, so no device feature is needed for the half-size buffers.
layout(constant_id = 16) const uint BF16 = 1;
layout(std430, binding = 0) readonly buffer QBuf { uvec2 q16[]; };  // 16-bit [H, n_q, D]
layout(std430, binding = 1) readonly buffer KBuf { uvec2 k16[]; };  // 16-bit [H_kv, n_k, D]
layout(std430, binding = 2) readonly buffer VBuf { uvec2 v16[]; };  // 16-bit [H_kv, n_k, D]
vec4 widen4(uvec2 x) {
  if (BF16 != 0u)
    return vec4(uintBitsToFloat(x.x << 16), uintBitsToFloat(x.x & 0xFFFF0000u),
                uintBitsToFloat(x.y << 16), uintBitsToFloat(x.y & 0xFFFF0000u));
  return vec4(unpackHalf2x16(x.x), unpackHalf2x16(x.y));
}
vec4 load_q(uint i) { return widen4(q16[i]); }
vec4 load_k(uint i) { return widen4(k16[i]); }
vec4 load_v(uint i) { return widen4(v16[i]); }
#else
layout(std430, binding = 0) readonly buffer QBuf { vec4 q[]; };   // f32 [H, n_q, D]
layout(std430, binding = 1) readonly buffer KBuf { vec4 k[]; };   // f32 [H_kv, n_k, D]
layout(std430, binding = 2) readonly buffer VBuf { vec4 v[]; };   // f32 [H_kv, n_k, D]
vec4 load_q(uint i) { return q[i]; }
vec4 load_k(uint i) { return k[i]; }
vec4 load_v(uint i) { return v[i]; }
#endif
layout(std430, binding = 3) buffer OBuf { vec4 o[]; };            // f32 [H, n_q, D]
layout(std430, binding = 4) writeonly buffer SBuf { float row_stat[]; };  // f32 [H, n_q]
layout(std430, binding = 5) readonly buffer QPos { int qpos[]; };  // i32 [n_q]
layout(std430, binding = 6) readonly buffer KPos { int kpos[]; };  // i32 [n_k]
layout(std430, binding = 7) readonly buffer KEnd { uint kend[]; };  // u32 [n_q]: visible keys
layout(std430, binding = 8) buffer State { float state[]; };        // f32 [H, n_q, STATE]

layout(push_constant) uniform Push {
  uint n_q;
  uint n_k;
  uint n_heads;
  uint group;            // query heads per kv head
  float scale;
  float log_nk;          // log(n_k), for the sigmoid bias
  uint per_head_layout;  // 1: one layout per head, 0: one shared by every head
  uint bq;               // query rows per layout row (block size, or ROWS for dense)
  uint n_qb;             // layout rows
  uint chunks;           // workgroups per layout row: ceil(bq / ROWS)
  uint pass_begin;       // passes [pass_begin, pass_end) over keys [key_begin, key_end)
  uint pass_end;
  uint key_begin;
  uint key_end;
  uint flags;            // FIRST: no state to load; LAST: key_end closes the passes
} pc;

const uint FLAG_FIRST = 1;
const uint FLAG_LAST = 2;

// Per-invocation state of the query row this lane helps with.
uint lane;
vec4 qv[DL4];      // this lane's chunks of q
vec4 acc[DL4];     // this lane's chunks of the output accumulator
float m_run;       // softmax: running max; entmax: max of z = s/2
float l_run;       // softmax / softplus: running sum of weights
float s[TILE];     // modified scores of the current tile
bool ok[TILE];     // entry kept (layout, causal rule, end of range)
float w[TILE];     // weights of the current tile's values
bool any_kept;     // the row has at least one kept key
float ent_lo, ent_hi, tau;
float e_cnt[EPL], e_sy[EPL], e_syy[EPL];

float lane_sum(float x) {
  if (LANES > 1) x += subgroupShuffleXor(x, 1);
  if (LANES > 2) x += subgroupShuffleXor(x, 2);
  if (LANES > 4) x += subgroupShuffleXor(x, 4);
  return x;
}

int lane_max(int x) {
  if (LANES > 1) x = max(x, subgroupShuffleXor(x, 1));
  if (LANES > 2) x = max(x, subgroupShuffleXor(x, 2));
  if (LANES > 4) x = max(x, subgroupShuffleXor(x, 4));
  return x;
}

float modified_score(float dot_qk, int qp, int kp) { return apply_mods(dot_qk * pc.scale, qp, kp); }

uint pass_count() { return NORM == NORM_ENTMAX15 ? 2 + ENT_PASSES : 1; }
bool is_output_pass(uint pass) { return pass + 1 == pass_count(); }

void reset_threshold_stats() {
  [[unroll]] for (uint u = 0; u < EPL; ++u) {
    e_cnt[u] = 0.0;
    e_sy[u] = 0.0;
    e_syy[u] = 0.0;
  }
}

// Starts row `row` (= h * n_q + i) of query head h: fresh, or from the state an earlier
// dispatch stored.
void begin_row(uint h, uint row) {
  init_mod_slopes(h, pc.n_heads);
  if ((pc.flags & FLAG_FIRST) != 0) {
    [[unroll]] for (uint c = 0; c < DL4; ++c) acc[c] = vec4(0.0);
    m_run = NEG_BIG;
    l_run = 0.0;
    tau = 0.0;
    ent_lo = 0.0;
    ent_hi = 0.0;
    any_kept = false;
    reset_threshold_stats();
    return;
  }
  const uint b = row * STATE;
  m_run = state[b];
  l_run = state[b + 1];
  ent_lo = state[b + 2];
  ent_hi = state[b + 3];
  tau = state[b + 4];
  any_kept = state[b + 5] != 0.0;
  [[unroll]] for (uint u = 0; u < EPL; ++u) {
    const uint slot = b + 8 + 3 * (u * LANES + lane);
    e_cnt[u] = state[slot];
    e_sy[u] = state[slot + 1];
    e_syy[u] = state[slot + 2];
  }
  [[unroll]] for (uint c = 0; c < DL4; ++c) acc[c] = o[row * D4 + c * LANES + lane];
}

// Stores the row state for the next dispatch.
void store_row(uint row) {
  const uint b = row * STATE;
  if (lane == 0) {
    state[b] = m_run;
    state[b + 1] = l_run;
    state[b + 2] = ent_lo;
    state[b + 3] = ent_hi;
    state[b + 4] = tau;
    state[b + 5] = any_kept ? 1.0 : 0.0;
  }
  [[unroll]] for (uint u = 0; u < EPL; ++u) {
    const uint slot = b + 8 + 3 * (u * LANES + lane);
    state[slot] = e_cnt[u];
    state[slot + 1] = e_sy[u];
    state[slot + 2] = e_syy[u];
  }
  [[unroll]] for (uint c = 0; c < DL4; ++c) o[row * D4 + c * LANES + lane] = acc[c];
}

float threshold(uint idx) { return ent_lo + (ent_hi - ent_lo) / float(ENT_T) * float(idx); }

// Consumes the tile's scores s[] / ok[]: updates the pass statistics and, in the output pass,
// fills w[] and rescales acc so that acc += w[t] * v[t] continues the running sum.
void consume_tile(uint pass) {
  if (pass == 0)
    KEY_LOOP for (uint t = 0; t < TILE; ++t) any_kept = any_kept || ok[t];
  if (NORM == NORM_ENTMAX15 && pass == 0) {
    KEY_LOOP for (uint t = 0; t < TILE; ++t)
      if (ok[t]) m_run = max(m_run, 0.5 * s[t]);
    return;
  }
  if (NORM == NORM_ENTMAX15 && !is_output_pass(pass)) {
    float th[EPL];
    [[unroll]] for (uint u = 0; u < EPL; ++u) th[u] = threshold(u * LANES + lane);
    KEY_LOOP for (uint t = 0; t < TILE; ++t) {
      [[unroll]] for (uint u = 0; u < EPL; ++u) {
        float y = 0.5 * s[t] - th[u];
        if (ok[t] && y > 0.0) {
          e_cnt[u] += 1.0;
          e_sy[u] += y;
          e_syy[u] += y * y;
        }
      }
    }
    return;
  }
  if (NORM == NORM_SOFTMAX) {
    float mt = m_run;
    KEY_LOOP for (uint t = 0; t < TILE; ++t)
      if (ok[t]) mt = max(mt, s[t]);
    float corr = exp(m_run - mt);
    l_run *= corr;
    [[unroll]] for (uint c = 0; c < DL4; ++c) acc[c] *= corr;
    KEY_LOOP for (uint t = 0; t < TILE; ++t) {
      w[t] = ok[t] ? exp(s[t] - mt) : 0.0;
      l_run += w[t];
    }
    m_run = mt;
  } else if (NORM == NORM_ENTMAX15) {
    KEY_LOOP for (uint t = 0; t < TILE; ++t) {
      float y = 0.5 * s[t] - tau;
      w[t] = ok[t] && y > 0.0 ? y * y : 0.0;
    }
  } else {
    KEY_LOOP for (uint t = 0; t < TILE; ++t) {
      w[t] = ok[t] ? elementwise_weight(s[t], pc.log_nk, float(pc.n_k)) : 0.0;
      if (NORM == NORM_SOFTPLUS) l_run += w[t];
    }
  }
}

// Ends a pass over all keys of the row (entmax bookkeeping; the output pass needs nothing).
void end_pass(uint pass) {
  if (NORM != NORM_ENTMAX15 || is_output_pass(pass)) return;
  if (pass == 0) {
    // tau lies in [max z - 1, max z): the largest entry alone contributes 1 at max z - 1.
    ent_lo = m_run - 1.0;
    ent_hi = m_run;
    reset_threshold_stats();
    return;
  }
  // The function sum_j [z_j - t]_+^2 decreases in t: keep the last threshold where it is >= 1.
  int best = -1;
  [[unroll]] for (uint u = 0; u < EPL; ++u)
    if (e_syy[u] >= 1.0) best = max(best, int(u * LANES + lane));
  best = max(lane_max(best), 0);
  float lo = threshold(uint(best));
  float hi = uint(best) + 1 < ENT_T ? threshold(uint(best) + 1) : ent_hi;
  if (pass == ENT_PASSES) {
    // Exact solve on the support {z > lo}: sum (y - x)^2 = 1 with y = z - lo, smaller root x.
    // Entries in (lo, hi] that the true tau drops add at most (hi - lo)^2 each.
    float cnt = 0.0, sy = 0.0, syy = 0.0;
    [[unroll]] for (uint u = 0; u < EPL; ++u) {
      bool mine = u * LANES + lane == uint(best);
      cnt += mine ? e_cnt[u] : 0.0;
      sy += mine ? e_sy[u] : 0.0;
      syy += mine ? e_syy[u] : 0.0;
    }
    cnt = lane_sum(cnt);
    sy = lane_sum(sy);
    syy = lane_sum(syy);
    float c = syy - 1.0;
    float den = sy + sqrt(max(sy * sy - cnt * c, 0.0));
    float x = den > 0.0 ? c / den : 0.0;
    tau = lo + clamp(x, 0.0, hi - lo);
  }
  ent_lo = lo;
  ent_hi = hi;
  reset_threshold_stats();
}

// Ends this dispatch for row `row`: closes finished passes, then writes either the output and
// row statistic (after the output pass) or the state for the next dispatch.
void end_row(uint row, uint live_pass_end) {
  if ((pc.flags & FLAG_LAST) != 0) end_pass(live_pass_end - 1);
  if ((pc.flags & FLAG_LAST) != 0 && is_output_pass(live_pass_end - 1)) {
    float inv = 1.0;
    if (NORM == NORM_SOFTMAX || NORM == NORM_SOFTPLUS) inv = l_run > 0.0 ? 1.0 / l_run : 0.0;
    [[unroll]] for (uint c = 0; c < DL4; ++c) o[row * D4 + c * LANES + lane] = acc[c] * inv;
    float stat = 0.0;
    if (any_kept) {
      if (NORM == NORM_SOFTMAX) stat = l_run > 0.0 ? m_run + log(l_run) : 0.0;
      if (NORM == NORM_SOFTPLUS) stat = l_run > 0.0 ? log(l_run) : 0.0;
      if (NORM == NORM_ENTMAX15) stat = tau;
    }
    if (lane == 0) row_stat[row] = stat;
  } else {
    store_row(row);
  }
}
