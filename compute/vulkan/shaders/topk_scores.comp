#version 450
// Exact top-k, step 1: raw scores q.k of a chunk of query rows against every key they can see,
// stored as order-preserving bits (unsigned order = float order) for the radix select.
// A workgroup computes a 64-query x 64-key tile, each invocation a 4 x 4 block of it, over
// head-dimension slices of 16 staged in shared memory. Tiles past the last query's visible
// keys are skipped (causal work really skipped).
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 16, local_size_y = 16) in;

layout(std430, binding = 0) readonly buffer QBuf { vec4 q[]; };    // f32 [H, n_q, D]
layout(std430, binding = 1) readonly buffer KBuf { vec4 k[]; };    // f32 [H_kv, n_k, D]
layout(std430, binding = 2) readonly buffer KEnd { uint kend[]; };  // u32 [n_q]: visible keys
layout(std430, binding = 3) writeonly buffer Bits { uint bits[]; };  // u32 [heads, rows, n_k]

layout(push_constant) uniform Push {
  uint n_q;
  uint n_k;
  uint d4;       // vec4 chunks per row (D / 4, D a multiple of 16)
  uint group;    // query heads per kv head
  uint i_begin;  // this chunk: queries [i_begin, i_begin + i_count) of heads h_begin + z
  uint i_count;
  uint h_begin;
} pc;

shared float qs[16][64];  // [dim in slice][query in tile]
shared float ks[16][64];  // [dim in slice][key in tile]

uint ordered(float x) {
  uint u = floatBitsToUint(x);
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16 + tx;
  const uint h = pc.h_begin + gl_WorkGroupID.z;
  const uint r0 = gl_WorkGroupID.x * 64;  // first row of the tile within the chunk
  const uint j0 = gl_WorkGroupID.y * 64;  // first key of the tile
  const uint last = min(r0 + 64, pc.i_count) - 1;
  if (j0 >= kend[pc.i_begin + last]) return;  // uniform: no query of the tile sees these keys

  const uint q_base = (h * pc.n_q + pc.i_begin) * pc.d4;
  const uint k_base = (h / pc.group) * pc.n_k * pc.d4;
  // Loads: invocation tid brings row tid / 4, vec4 (tid % 4) of the slice, for Q and for K.
  const uint lr = tid / 4, lc = tid % 4;
  float acc[4][4];
  [[unroll]] for (uint a = 0; a < 4; ++a)
    [[unroll]] for (uint b = 0; b < 4; ++b) acc[a][b] = 0.0;

  for (uint s = 0; s < pc.d4; s += 4) {
    const uint r = r0 + lr, j = j0 + lr;
    const vec4 qv = r < pc.i_count ? q[q_base + r * pc.d4 + s + lc] : vec4(0.0);
    const vec4 kv = j < pc.n_k ? k[k_base + j * pc.d4 + s + lc] : vec4(0.0);
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      qs[lc * 4 + e][lr] = qv[e];
      ks[lc * 4 + e][lr] = kv[e];
    }
    barrier();
    [[unroll]] for (uint t = 0; t < 16; ++t) {
      vec4 qa = vec4(qs[t][ty * 4], qs[t][ty * 4 + 1], qs[t][ty * 4 + 2], qs[t][ty * 4 + 3]);
      vec4 kb = vec4(ks[t][tx * 4], ks[t][tx * 4 + 1], ks[t][tx * 4 + 2], ks[t][tx * 4 + 3]);
      [[unroll]] for (uint a = 0; a < 4; ++a)
        [[unroll]] for (uint b = 0; b < 4; ++b) acc[a][b] = fma(qa[a], kb[b], acc[a][b]);
    }
    barrier();
  }
  const uint out_base = gl_WorkGroupID.z * pc.i_count * pc.n_k;
  [[unroll]] for (uint a = 0; a < 4; ++a) {
    const uint r = r0 + ty * 4 + a;
    if (r >= pc.i_count) continue;
    [[unroll]] for (uint b = 0; b < 4; ++b) {
      const uint j = j0 + tx * 4 + b;
      if (j < pc.n_k) bits[out_base + r * pc.n_k + j] = ordered(acc[a][b]);
    }
  }
}
