#version 450
// Dense and block-sparse attention. Each layout row (a block of bq queries) lists key ranges
// [j0, j1) to visit; dropped blocks are simply absent, so their work is skipped. A range is
// either full (only the causal rule applies) or partial, with one kept bit per (query, key).
// Dense attention is one range per row of ROWS queries, up to the last key any of them sees.
// K and V tiles are staged in shared memory and reused by the ROWS query rows of a workgroup.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

layout(std430, binding = 9) readonly buffer RangePtr { uint range_ptr[]; };  // u32 [layouts, n_qb + 1]
layout(std430, binding = 10) readonly buffer Ranges { uvec4 ranges[]; };  // {j0, j1, mask word, words/row}
layout(std430, binding = 11) readonly buffer Masks { uint mask_bits[]; };  // kept bits of partial ranges

const uint NO_MASK = 0xffffffffu;

shared vec4 Ks[TILE * D4];
shared vec4 Vs[TILE * D4];
shared int Kp[TILE];

void load_tile(uint kv_base, uint jt, uint j_end, bool with_v) {
  const uint NT = ROWS * LANES;
  const uint lid = gl_LocalInvocationID.x;
  [[unroll]] for (uint u = 0; u < (TILE * D4 + NT - 1) / NT; ++u) {
    uint e = u * NT + lid;
    if (e < TILE * D4) {
      uint j = jt + e / D4;
      bool in_range = j < j_end;
      uint src = kv_base + (in_range ? j : 0) * D4 + e % D4;
      Ks[e] = in_range ? load_k(src) : vec4(0.0);
      if (with_v) Vs[e] = in_range ? load_v(src) : vec4(0.0);
    }
  }
  if (uses_kpos() && lid < TILE) Kp[lid] = jt + lid < j_end ? kpos[jt + lid] : 0;
}

// Kept bits of one row of a partial range for the TILE keys from column `col` on.
uint tile_bits(uvec4 range, uint row_in_block, uint col) {
  const uint base = range.z + row_in_block * range.w + col / 32;
  const uint shift = col % 32;
  uint bits = mask_bits[base] >> shift;
  if (shift != 0 && col / 32 + 1 < range.w) bits |= mask_bits[base + 1] << (32 - shift);
  return bits;
}

void main() {
  lane = gl_LocalInvocationID.x % LANES;
  const uint local_row = gl_LocalInvocationID.x / LANES;
  const uint h = gl_WorkGroupID.y;
  const uint r = gl_WorkGroupID.x / pc.chunks;  // layout row
  const uint sub = gl_WorkGroupID.x % pc.chunks;
  const uint row_begin = r * pc.bq;
  const uint row_end = min(row_begin + pc.bq, pc.n_q);
  if (row_begin + sub * ROWS >= row_end) return;  // the whole workgroup: no live row
  const uint i = row_begin + sub * ROWS + local_row;
  const bool live = i < row_end;
  const uint row = h * pc.n_q + (live ? i : 0);
  const uint kv_base = (h / pc.group) * pc.n_k * D4;
  const uint layout_base = (pc.per_head_layout != 0 ? h : 0) * (pc.n_qb + 1);
  const uint e_begin = range_ptr[layout_base + r];
  const uint e_end = range_ptr[layout_base + r + 1];

  [[unroll]] for (uint c = 0; c < DL4; ++c) qv[c] = load_q(row * D4 + c * LANES + lane);
  begin_row(h, row);
  const uint row_kend = live ? kend[i] : 0;
  const int qp = qpos[live ? i : 0];

  for (uint pass = pc.pass_begin; pass < pc.pass_end; ++pass) {
    const bool out_pass = is_output_pass(pass);
    for (uint e = e_begin; e < e_end; ++e) {
      const uvec4 range = ranges[e];
      const uint j_begin = max(range.x, pc.key_begin);
      const uint j_end = min(min(range.y, pc.n_k), pc.key_end);
      for (uint jt = j_begin; jt < j_end; jt += TILE) {
        barrier();
        load_tile(kv_base, jt, j_end, out_pass);
        barrier();
        const uint bits = range.z != NO_MASK && live ? tile_bits(range, i - row_begin, jt - range.x)
                                                     : 0xffffffffu;
        KEY_LOOP for (uint t = 0; t < TILE; ++t) {
          float part = 0.0;
          [[unroll]] for (uint c = 0; c < DL4; ++c) part += dot(qv[c], Ks[t * D4 + c * LANES + lane]);
          float dot_qk = lane_sum(part);
          uint j = jt + t;
          ok[t] = live && j < j_end && j < row_kend && ((bits >> t) & 1u) != 0u;
          s[t] = modified_score(dot_qk, qp, uses_kpos() ? Kp[t] : 0);
        }
        consume_tile(pass);
        if (out_pass) {
          KEY_LOOP for (uint t = 0; t < TILE; ++t)
            [[unroll]] for (uint c = 0; c < DL4; ++c) acc[c] += w[t] * Vs[t * D4 + c * LANES + lane];
        }
      }
    }
    if (pass + 1 < pc.pass_end) end_pass(pass);  // a dispatch of several passes covers all keys
  }
  if (live) end_row(row, pc.pass_end);
}
