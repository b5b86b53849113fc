#version 450
// Index-sparse attention: every query visits its own list of kept keys (dynamic selectors such
// as top-k), gathering K and V rows straight from memory, TILE keys at a time.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(std430, binding = 9) readonly buffer IdxPtr { uint idx_ptr[]; };  // u32 [layouts, n_q + 1]
layout(std430, binding = 10) readonly buffer Idx { uint idx[]; };        // u32 [nnz] key indices

uint js[TILE];

// First list position in [lo, hi) whose key is >= key (lists are ascending).
uint lower_bound(uint lo, uint hi, uint key) {
  while (lo < hi) {
    uint mid = (lo + hi) / 2;
    if (idx[mid] < key) lo = mid + 1; else hi = mid;
  }
  return lo;
}

void main() {
  lane = gl_LocalInvocationID.x % LANES;
  const uint h = gl_WorkGroupID.y;
  const uint i = gl_WorkGroupID.x * ROWS + gl_LocalInvocationID.x / LANES;
  if (i >= pc.n_q) return;  // a row's lanes leave together, so shuffles stay within live rows
  const uint row = h * pc.n_q + i;
  const uint kv_base = (h / pc.group) * pc.n_k * D4;
  const uint layout_base = (pc.per_head_layout != 0 ? h : 0) * (pc.n_q + 1);
  uint p_begin = idx_ptr[layout_base + i];
  uint p_end = idx_ptr[layout_base + i + 1];
  if (pc.key_begin > 0) p_begin = lower_bound(p_begin, p_end, pc.key_begin);
  if (pc.key_end < pc.n_k) p_end = lower_bound(p_begin, p_end, pc.key_end);

  [[unroll]] for (uint c = 0; c < DL4; ++c) qv[c] = load_q(row * D4 + c * LANES + lane);
  begin_row(h, row);
  const int qp = qpos[i];

  for (uint pass = pc.pass_begin; pass < pc.pass_end; ++pass) {
    const bool out_pass = is_output_pass(pass);
    for (uint pt = p_begin; pt < p_end; pt += TILE) {
      KEY_LOOP for (uint t = 0; t < TILE; ++t) {
        ok[t] = pt + t < p_end;
        js[t] = ok[t] ? idx[pt + t] : 0;
        const uint base = kv_base + js[t] * D4;
        float part = 0.0;
        [[unroll]] for (uint c = 0; c < DL4; ++c) part += dot(qv[c], load_k(base + c * LANES + lane));
        s[t] = modified_score(lane_sum(part), qp, uses_kpos() ? kpos[js[t]] : 0);
      }
      consume_tile(pass);
      if (out_pass) {
        KEY_LOOP for (uint t = 0; t < TILE; ++t) {
          const uint base = kv_base + js[t] * D4;
          [[unroll]] for (uint c = 0; c < DL4; ++c) acc[c] += w[t] * load_v(base + c * LANES + lane);
        }
      }
    }
    if (pass + 1 < pc.pass_end) end_pass(pass);  // a dispatch of several passes covers all keys
  }
  end_row(row, pc.pass_end);
}
