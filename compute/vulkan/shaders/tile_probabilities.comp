#version 450
// Pooled probabilities of a tile (compute/probabilities.h tile_probabilities): CELL_THREADS
// invocations share the entries of one output cell (a workgroup covers 64 / CELL_THREADS cells
// of a row of cells), then reduce them with max or sum. A cell's rows may be split into strips
// over several dispatches (each adds to or maxes with the value the previous strip left), which
// bounds the loop iterations of one invocation.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint D = 64;  // head dimension, padded to a multiple of 4
#include "score_functions.glsl"
layout(constant_id = 16) const uint INDICES = 0;  // 1: per-query key lists, 0: key ranges
layout(constant_id = 17) const uint CELL_THREADS = 64;  // power of two, at most 64

const uint NT = 64;
layout(local_size_x = 64) in;
const uint D4 = D / 4;
const uint NO_MASK = 0xffffffffu;

layout(std430, binding = 0) readonly buffer QBuf { vec4 q[]; };          // f32 [q1 - q0, D]
layout(std430, binding = 1) readonly buffer KBuf { vec4 k[]; };          // f32 [k1 - k0, D]
layout(std430, binding = 2) readonly buffer QPos { int qpos[]; };        // i32 [n_q]
layout(std430, binding = 3) readonly buffer KPos { int kpos[]; };        // i32 [n_k]
layout(std430, binding = 4) readonly buffer KEnd { uint kend[]; };       // u32 [n_q]
layout(std430, binding = 5) readonly buffer RangePtr { uint range_ptr[]; };  // u32 [n_qb + 1]
layout(std430, binding = 6) readonly buffer Ranges { uvec4 ranges[]; };
layout(std430, binding = 7) readonly buffer Masks { uint mask_bits[]; };
layout(std430, binding = 8) readonly buffer IdxPtr { uint idx_ptr[]; };  // u32 [n_q + 1]
layout(std430, binding = 9) readonly buffer Idx { uint idx[]; };
layout(std430, binding = 10) readonly buffer Stat { float row_stat[]; };  // f32 [n_q] of the head
layout(std430, binding = 11) buffer Cells { float cells[]; };             // f32 [h, w]
layout(std430, binding = 12) readonly buffer RowBounds { uint row_bounds[]; };  // u32 [h + 1]
layout(std430, binding = 13) readonly buffer ColBounds { uint col_bounds[]; };  // u32 [w + 1]

layout(push_constant) uniform Push {
  uint n_q;
  uint n_k;
  uint head;
  uint n_heads;
  float scale;
  float log_nk;
  uint q0;
  uint k0;
  uint w;
  uint pool_mean;  // 1: mean, 0: max
  uint strip;      // this dispatch's strip of each cell's rows
  uint n_strips;
  uint bq;         // ranges: query rows per layout row
} pc;

shared float red[NT];

bool kept(uint i, uint j) {
  if (j >= kend[i]) return false;
  if (INDICES != 0) {
    uint lo = idx_ptr[i], hi = idx_ptr[i + 1];
    while (lo < hi) {
      uint mid = (lo + hi) / 2;
      if (idx[mid] < j) lo = mid + 1; else hi = mid;
    }
    return lo < idx_ptr[i + 1] && idx[lo] == j;
  }
  uint r = i / pc.bq;
  uint lo = range_ptr[r], hi = range_ptr[r + 1];  // first range with j1 > j
  while (lo < hi) {
    uint mid = (lo + hi) / 2;
    if (ranges[mid].y <= j) lo = mid + 1; else hi = mid;
  }
  if (lo == range_ptr[r + 1]) return false;
  uvec4 range = ranges[lo];
  if (j < range.x) return false;
  if (range.z == NO_MASK) return true;
  uint col = j - range.x;
  return ((mask_bits[range.z + (i - r * pc.bq) * range.w + col / 32] >> (col % 32)) & 1u) != 0u;
}

float probability(float sc, float stat) {
  if (NORM == NORM_SOFTMAX) return exp(sc - stat);
  if (NORM == NORM_ENTMAX15) {
    float t = 0.5 * sc - stat;
    return t > 0.0 ? t * t : 0.0;
  }
  float wgt = elementwise_weight(sc, pc.log_nk, float(pc.n_k));
  return NORM == NORM_SOFTPLUS ? wgt * exp(-stat) : wgt;
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint t = lid % CELL_THREADS;
  const uint x = gl_WorkGroupID.x * (NT / CELL_THREADS) + lid / CELL_THREADS;
  const uint y = gl_WorkGroupID.y;
  const bool live = x < pc.w;
  const uint r0 = row_bounds[y], r1 = row_bounds[y + 1];
  const uint c0 = live ? col_bounds[x] : 0, c1 = live ? col_bounds[x + 1] : 0;
  const uint s0 = r0 + (r1 - r0) * pc.strip / pc.n_strips;
  const uint s1 = r0 + (r1 - r0) * (pc.strip + 1) / pc.n_strips;
  const uint ncols = c1 - c0;
  const uint total = (s1 - s0) * ncols;
  init_mod_slopes(pc.head, pc.n_heads);

  float pooled = 0.0;
  for (uint e = t; e < total; e += CELL_THREADS) {
    const uint i = s0 + e / ncols, j = c0 + e % ncols;
    float pr = 0.0;
    if (kept(i, j)) {
      const uint qb = (i - pc.q0) * D4, kb = (j - pc.k0) * D4;
      vec4 acc = vec4(0.0);
      [[unroll]] for (uint c = 0; c < D4; ++c) acc += q[qb + c] * k[kb + c];
      float sc = apply_mods((acc.x + acc.y + acc.z + acc.w) * pc.scale, qpos[i],
                            uses_kpos() ? kpos[j] : 0);
      pr = probability(sc, row_stat[i]);
    }
    pooled = pc.pool_mean != 0 ? pooled + pr : max(pooled, pr);
  }
  red[lid] = pooled;
  barrier();
  [[unroll]] for (uint u = 0; u < 6; ++u) {
    const uint half_n = NT >> (u + 1);
    if (half_n < CELL_THREADS && t < half_n)
      red[lid] = pc.pool_mean != 0 ? red[lid] + red[lid + half_n] : max(red[lid], red[lid + half_n]);
    barrier();
  }
  if (t == 0 && live) {
    const uint cell = y * pc.w + x;
    float v = red[lid];
    if (pc.strip > 0) v = pc.pool_mean != 0 ? cells[cell] + v : max(cells[cell], v);
    if (pc.pool_mean != 0 && pc.strip + 1 == pc.n_strips) v /= float(r1 - r0) * float(ncols);
    cells[cell] = v;
  }
}
