#version 450
// Block top-k, step 2: for query head h, every pooled query block r scores the key blocks it
// can see (c < n_vis[r]) with its kv head's pooled keys: one invocation per (r, c) pair.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer PQ { float pq[]; };     // f32 [H, n_qb, D]
layout(std430, binding = 1) readonly buffer PK { float pk[]; };     // f32 [H_kv, n_kb, D]
layout(std430, binding = 2) readonly buffer NVis { uint n_vis[]; };  // u32 [n_qb]
layout(std430, binding = 3) writeonly buffer S { float score[]; };  // f32 [H, n_qb, n_kb]

layout(push_constant) uniform Push {
  uint n_qb;
  uint n_kb;
  uint d;
  uint group;  // query heads per kv head
} pc;

void main() {
  const uint c = gl_GlobalInvocationID.x, r = gl_WorkGroupID.y, h = gl_WorkGroupID.z;
  if (c >= n_vis[r]) return;  // invisible blocks are not scored
  const uint a = (h * pc.n_qb + r) * pc.d, b = ((h / pc.group) * pc.n_kb + c) * pc.d;
  float s = 0.0;
  for (uint t = 0; t < pc.d; ++t) s = fma(pq[a + t], pk[b + t], s);
  score[(h * pc.n_qb + r) * pc.n_kb + c] = s;
}
