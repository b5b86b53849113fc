#version 450
// Exact top-k, step 2: one workgroup per query row keeps the row's take = min(k, visible) keys
// with the largest scores, ties to the lower key index (as the CPU selector), written ascending.
//
// Radix select over the order-preserving score bits, 8 bits per pass from the top: a workgroup
// histogram of the next digit among keys matching the prefix found so far, then a suffix scan
// picks the digit holding the take-th largest key. After four passes `thr` is the take-th largest
// value exactly and `need` says how many keys equal to it are kept (earlier, when every key of
// the chosen digit is kept: all keys >= the prefix). Ordered compaction then writes keys above
// the threshold and the first `need` keys equal to it in index order: the kept keys before key j
// are (#above before j) + min(#equal before j, need), one workgroup scan of packed counts.
//
// Loops stay short for lavapipe's loop limit: each invocation takes PER keys per block of
// WG * PER keys, so a row of n keys costs about 5 * n / (WG * PER) block iterations.
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint WG = 256;  // invocations (power of two, 8..256)
layout(constant_id = 1) const uint PER = 16;  // keys per invocation per block (WG * PER < 2^16)
layout(local_size_x_id = 0) in;
const uint RADIX = 256;         // 8-bit digits
const uint BINS = RADIX / WG;   // digits per invocation in the scan
const uint BLOCK = WG * PER;

layout(std430, binding = 0) readonly buffer Bits { uint bits[]; };  // u32 [heads, rows, n_k]
layout(std430, binding = 1) readonly buffer KEnd { uint kend[]; };  // u32 [n_q]: visible keys
layout(std430, binding = 2) readonly buffer OutPtr { uint out_ptr[]; };  // u32 [H, n_q]: first slot
layout(std430, binding = 3) writeonly buffer Out { uint out_idx[]; };    // u32 [nnz]: kept keys

layout(push_constant) uniform Push {
  uint n_q;
  uint n_k;
  uint k;
  uint i_begin;  // this chunk: queries [i_begin, i_begin + i_count) of heads h_begin + y
  uint i_count;
  uint h_begin;
} pc;

shared uint hist[RADIX];
shared uint scan[WG];
shared uint sel_digit, sel_need, sel_all;

// Inclusive workgroup scan of x (Hillis-Steele in shared memory).
uint scan_inclusive(uint x, uint tid) {
  scan[tid] = x;
  barrier();
  for (uint off = 1; off < WG; off <<= 1) {
    uint add = tid >= off ? scan[tid - off] : 0u;
    barrier();
    scan[tid] += add;
    barrier();
  }
  return scan[tid];
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint i = pc.i_begin + gl_WorkGroupID.x;
  const uint h = pc.h_begin + gl_WorkGroupID.y;
  const uint nv = kend[i];
  const uint take = min(pc.k, nv);
  const uint base = (gl_WorkGroupID.y * pc.i_count + gl_WorkGroupID.x) * pc.n_k;
  const uint out_base = out_ptr[h * pc.n_q + i];
  if (take == 0u) return;
  if (take == nv) {  // every visible key
    for (uint j = tid; j < nv; j += WG) out_idx[out_base + j] = j;
    return;
  }

  // Keys >= lo are kept, and the first `need` keys == thr (thr < lo).
  uint prefix = 0u, prefix_mask = 0u, need = take, lo = 0u, thr = 0u;
  [[unroll]] for (int shift = 24; shift >= 0; shift -= 8) {
    for (uint b = tid; b < RADIX; b += WG) hist[b] = 0u;
    barrier();
    for (uint b0 = 0; b0 < nv; b0 += BLOCK) {
      [[unroll]] for (uint t = 0; t < PER; ++t) {
        const uint j = b0 + t * WG + tid;
        if (j < nv) {
          const uint u = bits[base + j];
          if ((u & prefix_mask) == prefix) atomicAdd(hist[(u >> shift) & 255u], 1u);
        }
      }
    }
    barrier();
    // Invocation tid looks at digits 255 - tid * BINS down to 256 - (tid + 1) * BINS: keys
    // matching the prefix with that digit or a larger one (incl) and a larger one only (excl).
    uint own = 0u;
    for (uint b = 0; b < BINS; ++b) own += hist[255u - tid * BINS - b];
    uint excl = scan_inclusive(own, tid) - own;
    for (uint b = 0; b < BINS; ++b) {
      const uint digit = 255u - tid * BINS - b;
      const uint incl = excl + hist[digit];
      if (excl < need && need <= incl) {
        sel_digit = digit;
        sel_need = need - excl;
        sel_all = need == incl ? 1u : 0u;
      }
      excl = incl;
    }
    barrier();
    prefix |= sel_digit << shift;
    prefix_mask |= 255u << shift;
    need = sel_need;
    const bool all = sel_all != 0u;
    barrier();  // sel_* and hist are rewritten by the next pass
    if (all) {  // the whole digit's bin is kept: no need to look at lower bits
      lo = prefix;
      need = 0u;
      thr = 0u;
      break;
    }
    if (shift == 0) {  // thr is the take-th largest value exactly
      lo = prefix + 1u;
      thr = prefix;
    }
  }

  uint gt_seen = 0u, eq_seen = 0u;  // over earlier blocks
  for (uint b0 = 0; b0 < nv; b0 += BLOCK) {
    // This invocation's PER consecutive keys of the block, in index order.
    const uint j0 = b0 + tid * PER;
    uint u[PER];
    uint gt = 0u, eq = 0u;
    [[unroll]] for (uint t = 0; t < PER; ++t) {
      u[t] = j0 + t < nv ? bits[base + j0 + t] : 0u;
      const bool valid = j0 + t < nv;
      gt += valid && u[t] >= lo ? 1u : 0u;
      eq += valid && u[t] < lo && u[t] == thr ? 1u : 0u;
    }
    // Packed counts (each <= BLOCK < 2^16): greater in the low half, equal in the high half.
    const uint packed = gt | (eq << 16);
    const uint incl = scan_inclusive(packed, tid);
    const uint total = scan[WG - 1];
    uint gt_before = gt_seen + ((incl - packed) & 0xffffu);
    uint eq_before = eq_seen + ((incl - packed) >> 16);
    [[unroll]] for (uint t = 0; t < PER; ++t) {
      if (j0 + t >= nv) continue;
      if (u[t] >= lo) {
        out_idx[out_base + gt_before + min(eq_before, need)] = j0 + t;
        ++gt_before;
      } else if (u[t] == thr) {
        if (eq_before < need) out_idx[out_base + gt_before + eq_before] = j0 + t;
        ++eq_before;
      }
    }
    gt_seen += total & 0xffffu;
    eq_seen += total >> 16;
    barrier();  // scan[] is rewritten by the next block
  }
}
