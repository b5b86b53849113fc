#version 450
// Index-sparse attention: every query visits its own list of kept keys (dynamic selectors such
// as top-k), gathering K and V rows straight from memory, TILE keys at a time.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(std430, binding = 8) readonly buffer IdxPtr { uint idx_ptr[]; };  // u32 [layouts, n_q + 1]
layout(std430, binding = 9) readonly buffer Idx { uint idx[]; };         // u32 [nnz] key indices

uint js[TILE];

void main() {
  lane = gl_LocalInvocationID.x % LANES;
  const uint h = gl_WorkGroupID.y;
  const uint i = gl_WorkGroupID.x * ROWS + gl_LocalInvocationID.x / LANES;
  if (i >= pc.n_q) return;  // a row's lanes leave together, so shuffles stay within live rows
  const uint kv_base = (h / pc.group) * pc.n_k * D4;
  const uint layout_base = (pc.per_head_layout != 0 ? h : 0) * (pc.n_q + 1);
  const uint p_begin = idx_ptr[layout_base + i];
  const uint p_end = idx_ptr[layout_base + i + 1];

  init_row(h);
  const uint q_base = (h * pc.n_q + i) * D4;
  [[unroll]] for (uint c = 0; c < DL4; ++c) qv[c] = q[q_base + c * LANES + lane];
  const int qp = qpos[i];

  for (uint pass = 0; pass < pass_count(); ++pass) {
    const bool out_pass = is_output_pass(pass);
    for (uint pt = p_begin; pt < p_end; pt += TILE) {
      [[unroll]] for (uint t = 0; t < TILE; ++t) {
        ok[t] = pt + t < p_end;
        js[t] = ok[t] ? idx[pt + t] : 0;
        const uint base = kv_base + js[t] * D4;
        float part = 0.0;
        [[unroll]] for (uint c = 0; c < DL4; ++c) part += dot(qv[c], k[base + c * LANES + lane]);
        s[t] = modified_score(lane_sum(part), qp, uses_kpos() ? kpos[js[t]] : 0);
      }
      consume_tile(pass);
      if (out_pass) {
        [[unroll]] for (uint t = 0; t < TILE; ++t) {
          const uint base = kv_base + js[t] * D4;
          [[unroll]] for (uint c = 0; c < DL4; ++c) acc[c] += w[t] * v[base + c * LANES + lane];
        }
      }
    }
    end_pass(pass);
  }

  const float inv = output_scale();
  [[unroll]] for (uint c = 0; c < DL4; ++c) o[q_base + c * LANES + lane] = acc[c] * inv;
  if (lane == 0) row_stat[h * pc.n_q + i] = final_row_stat();
}
