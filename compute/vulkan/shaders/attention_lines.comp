#version 450
// Line-sparse attention (vertical-slash): a head keeps whole key columns and whole diagonals,
// a diagonal being the keys at one offset qpos - kpos from the query. Nothing per query is
// stored: a row's keys are the merge of the columns (ascending) and of its diagonals' keys
// (offsets descending, so keys ascending), made TILE keys at a time; a column that lies on one
// of the row's diagonals is visited once. Default positions only (key j at position j), so a
// diagonal's key is the query's position minus the offset.
#extension GL_GOOGLE_include_directive : require
#include "attention_common.glsl"

// u32 [layouts, 4]: the layout's columns are lines[c0, c1), its offsets lines[o0, o1).
layout(std430, binding = 9) readonly buffer LinePtr { uint line_ptr[]; };
layout(std430, binding = 10) readonly buffer Lines { int lines[]; };

const uint NONE = 0xffffffffu;
uint js[TILE];

// First column in [lo, hi) that is >= key.
uint first_column(uint lo, uint hi, int key) {
  while (lo < hi) {
    uint mid = (lo + hi) / 2;
    if (lines[mid] < key) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// First offset in [lo, hi) whose key qp - offset is >= key (offsets descend).
uint first_diagonal(uint lo, uint hi, int qp, int key) {
  while (lo < hi) {
    uint mid = (lo + hi) / 2;
    if (qp - lines[mid] < key) lo = mid + 1; else hi = mid;
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
  const uint lb = (pc.per_head_layout != 0 ? h : 0) * 4;
  const uint c0 = line_ptr[lb], c1 = line_ptr[lb + 1], o0 = line_ptr[lb + 2], o1 = line_ptr[lb + 3];
  const int qp = qpos[i];
  // Keys [lo, hi): this dispatch's chunk, cut at the causal limit.
  const int lo = int(pc.key_begin);
  const int hi = int(min(pc.key_end, kend[i]));

  [[unroll]] for (uint c = 0; c < DL4; ++c) qv[c] = load_q(row * D4 + c * LANES + lane);
  begin_row(h, row);

  for (uint pass = pc.pass_begin; pass < pc.pass_end; ++pass) {
    const bool out_pass = is_output_pass(pass);
    uint ca = first_column(c0, c1, lo), cz = first_column(c0, c1, max(lo, hi));
    uint da = first_diagonal(o0, o1, qp, lo), dz = first_diagonal(o0, o1, qp, max(lo, hi));
    while (ca < cz || da < dz) {
      KEY_LOOP for (uint t = 0; t < TILE; ++t) {
        const uint kc = ca < cz ? uint(lines[ca]) : NONE;
        const uint kd = da < dz ? uint(qp - lines[da]) : NONE;
        const uint j = min(kc, kd);
        ok[t] = j != NONE;
        if (ok[t] && kc == j) ++ca;
        if (ok[t] && kd == j) ++da;
        js[t] = ok[t] ? j : 0;
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
