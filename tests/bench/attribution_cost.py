#!/usr/bin/python3
"""What attribution costs against the forward pass it explains.

  /usr/bin/python3 tests/bench/attribution_cost.py --build build/native

Writes a GPT-2-small-shaped checkpoint with random weights (12 layers, 12 heads, 768 wide,
vocabulary 50,257; the one forward_vs_torch.py writes) with 256 random token ids under
<build>/bench/attrib-gpt2-small, then runs attn_bench's BM_Attrib* rows (bench_attribution.cpp)
side by side in one process:
  forward   the plain forward pass (the unit)
  reverse   one gradient pass for the last position's top token, the forward it starts with
            included, patterns and dz/dA kept as the attribution core keeps them
  ig        integrated gradients with 32 steps through the core, f32 matmuls
  ig bf16   the same with bf16 matmuls (`attribute --matmul bf16`): AMX tile products on CPUs
            with AMX-BF16, each weight matrix packed once for all steps
Targets: reverse <= 3x the forward; integrated gradients <= 20x, judged on the bf16 row where
the CPU has AMX-BF16 (elsewhere bf16 matmuls gain no speed and the rows report their ratios).
Prints the activations the reverse pass keeps, the process's peak RSS, and how far bf16 matmuls
move the integrated gradients (relative L2 distance and Spearman correlation against f32).

Arithmetic floor of the integrated-gradients row in f32: each step is a forward without the
vocabulary projection (~44 GFLOP here) and a backward of the same matrix work (~44 GFLOP), so
32 steps are ~2.8 TFLOP, while the forward is ~64 GFLOP: 44x the forward at the forward's own
GEMM rate, which is why the 20x target needs the bf16 tile products.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forward_vs_torch as fvt  # noqa: E402  (the GPT-2-small checkpoint writer)

TOKENS = 256
REVERSE_TARGET = 3.0
IG_TARGET = 20.0


def cpu_has_amx():
    """True when /proc/cpuinfo lists AMX-BF16 (the GEMM's tile path)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any("amx_bf16" in line.split() for line in f if line.startswith("flags"))
    except OSError:
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build/native")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    exe = os.path.join(args.build, "tests", "bench", "attn_bench")
    folder = os.path.join(args.build, "bench", "attrib-gpt2-small")
    fvt.prepare(folder, args.seed, TOKENS)
    env = dict(os.environ, ATTN_ATTRIB_MODEL=folder)
    out = subprocess.run([exe, "--benchmark_filter=BM_Attrib", "--benchmark_format=json"],
                         env=env, check=True, capture_output=True, text=True).stdout
    rows = {b["name"].split("/")[0]: b for b in json.loads(out)["benchmarks"]}
    fwd = rows["BM_AttribForward"]["min_s"]
    rev = rows["BM_AttribReverse"]
    ig = rows["BM_AttribIG"]
    ig16 = rows["BM_AttribIGBf16"]
    r_ratio, ig_ratio, ig16_ratio = rev["min_s"] / fwd, ig["min_s"] / fwd, ig16["min_s"] / fwd
    amx = cpu_has_amx()
    print(f"attribution cost, GPT-2-small shape, {TOKENS} tokens ({args.build}):")
    print(f"  forward                 {fwd * 1e3:9.1f} ms")
    print(f"  reverse (grad + fwd)    {rev['min_s'] * 1e3:9.1f} ms  {r_ratio:5.2f}x forward "
          f"(target <= {REVERSE_TARGET}x)  [forward part {rev['forward_min_s'] * 1e3:.1f} ms, "
          f"backward {rev['backward_min_s'] * 1e3:.1f} ms]")
    print(f"  integrated gradients 32 {ig['min_s'] * 1e3:9.1f} ms  {ig_ratio:5.2f}x forward "
          f"(f32 matmuls); sum / (z(x) - z(0)) = {ig['sum_over_delta']:.4f}")
    print(f"  ... with bf16 matmuls   {ig16['min_s'] * 1e3:9.1f} ms  {ig16_ratio:5.2f}x forward "
          f"(target <= {IG_TARGET}x{'' if amx else '; no AMX-BF16 here: ratio reported'}); "
          f"sum / (z(x) - z(0)) = {ig16['sum_over_delta']:.4f}; against f32: relative L2 "
          f"{ig16['rel_l2_vs_f32']:.4f}, Spearman {ig16['spearman_vs_f32']:.5f}")
    print(f"  reverse pass keeps {rev['trace_mib']:.1f} MiB of activations; peak RSS "
          f"{rev['peak_rss_mib']:.0f} MiB (model loaded: {rev['peak_rss_before_mib']:.0f} MiB)")
    flops_fwd = 2 * TOKENS * (12 * (4 * 768 * 768 + 2 * 768 * 3072) + 768 * 50257)
    flops_step = 2 * 2 * TOKENS * 12 * (4 * 768 * 768 + 2 * 768 * 3072)
    print(f"  forward runs at {flops_fwd / fwd / 1e9:.0f} GFLOP/s (matrix work only); an "
          f"integrated-gradients step is {flops_step / 1e9:.0f} GFLOP of matrix work, so 32 "
          f"steps at the forward's rate take {32 * flops_step / (flops_fwd / fwd) / fwd:.1f}x "
          f"the forward")
    ig_met = ig16_ratio <= IG_TARGET or not amx
    ok = r_ratio <= REVERSE_TARGET and ig_met
    if r_ratio > REVERSE_TARGET:
        print(f"MISSED: reverse pass {r_ratio:.2f}x > {REVERSE_TARGET}x the forward")
    if not ig_met:
        print(f"MISSED: integrated gradients (bf16 matmuls) {ig16_ratio:.2f}x > {IG_TARGET}x "
              "the forward")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
