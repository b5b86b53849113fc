#version 450
// Exact top-k, step 1: raw scores q.k of a chunk of query rows against every key they can see,
// stored as order-preserving bits (unsigned order = float order) for the radix select.
// A workgroup computes a 32-query x 32-key tile, each invocation a 4 x 4 block of it straight
// from Q and K (vec4 loads that the cache shares between neighbours; no shared memory, no
// barriers: lavapipe runs this far faster than a shared-memory tiling). Tiles past the last
// query's visible keys are skipped (causal work really skipped).
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x = 8, local_size_y = 8) in;

layout(std430, binding = 0) readonly buffer QBuf { vec4 q[]; };    // f32 [H, n_q, D]
layout(std430, binding = 1) readonly buffer KBuf { vec4 k[]; };    // f32 [H_kv, n_k, D]
layout(std430, binding = 2) readonly buffer KEnd { uint kend[]; };  // u32 [n_q]: visible keys
layout(std430, binding = 3) writeonly buffer Bits { uint bits[]; };  // u32 [heads, rows, n_k]

layout(push_constant) uniform Push {
  uint n_q;
  uint n_k;
  uint d4;       // vec4 chunks per row (D / 4)
  uint group;    // query heads per kv head
  uint i_begin;  // this chunk: queries [i_begin, i_begin + i_count) of heads h_begin + z
  uint i_count;
  uint h_begin;
} pc;

const uint TILE = 32;  // queries and keys per workgroup

uint ordered(float x) {
  uint u = floatBitsToUint(x);
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

void main() {
  const uint h = pc.h_begin + gl_WorkGroupID.z;
  const uint r0 = gl_WorkGroupID.x * TILE;  // first row of the tile within the chunk
  const uint j0 = gl_WorkGroupID.y * TILE;  // first key of the tile
  const uint last = min(r0 + TILE, pc.i_count) - 1;
  if (j0 >= kend[pc.i_begin + last]) return;  // no query of the tile sees these keys

  // This invocation: rows r0 + ly + 8a and keys j0 + lx + 8b (a, b < 4), clamped for loads.
  const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
  uint qrow[4], krow[4];
  [[unroll]] for (uint a = 0; a < 4; ++a) {
    const uint r = min(r0 + ly + 8 * a, pc.i_count - 1);
    qrow[a] = (h * pc.n_q + pc.i_begin + r) * pc.d4;
    const uint j = min(j0 + lx + 8 * a, pc.n_k - 1);
    krow[a] = ((h / pc.group) * pc.n_k + j) * pc.d4;
  }
  float acc[4][4];
  [[unroll]] for (uint a = 0; a < 4; ++a)
    [[unroll]] for (uint b = 0; b < 4; ++b) acc[a][b] = 0.0;
  for (uint c = 0; c < pc.d4; ++c) {
    vec4 qa[4], kb[4];
    [[unroll]] for (uint a = 0; a < 4; ++a) {
      qa[a] = q[qrow[a] + c];
      kb[a] = k[krow[a] + c];
    }
    [[unroll]] for (uint a = 0; a < 4; ++a)
      [[unroll]] for (uint b = 0; b < 4; ++b) {
        acc[a][b] = fma(qa[a].x, kb[b].x, acc[a][b]);
        acc[a][b] = fma(qa[a].y, kb[b].y, acc[a][b]);
        acc[a][b] = fma(qa[a].z, kb[b].z, acc[a][b]);
        acc[a][b] = fma(qa[a].w, kb[b].w, acc[a][b]);
      }
  }
  const uint out_base = gl_WorkGroupID.z * pc.i_count * pc.n_k;
  [[unroll]] for (uint a = 0; a < 4; ++a) {
    const uint r = r0 + ly + 8 * a;
    if (r >= pc.i_count) continue;
    [[unroll]] for (uint b = 0; b < 4; ++b) {
      const uint j = j0 + lx + 8 * b;
      if (j < pc.n_k) bits[out_base + r * pc.n_k + j] = ordered(acc[a][b]);
    }
  }
}
