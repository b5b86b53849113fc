#version 450
// Block top-k, step 1: mean of each block of `block` rows (the last block may be shorter), for
// every head of a [heads, n, D] tensor: invocation x is one (pooled row, dimension) pair.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer In { float x[]; };     // f32 [heads, n, D]
layout(std430, binding = 1) writeonly buffer Out { float y[]; };   // f32 [heads, nb, D]

layout(push_constant) uniform Push {
  uint n;      // rows per head
  uint d;      // row length D
  uint block;  // rows per block
  uint nb;     // blocks per head, ceil(n / block)
} pc;

void main() {
  const uint e = gl_GlobalInvocationID.x;  // pooled row * D + dimension
  if (e >= pc.nb * pc.d) return;
  const uint head = gl_WorkGroupID.y;
  const uint c = e / pc.d, t = e % pc.d;
  const uint r0 = c * pc.block, r1 = min(r0 + pc.block, pc.n);
  float sum = 0.0;
  for (uint r = r0; r < r1; ++r) sum += x[(head * pc.n + r) * pc.d + t];
  y[head * pc.nb * pc.d + e] = sum / float(r1 - r0);
}
