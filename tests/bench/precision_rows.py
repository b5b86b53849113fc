#!/usr/bin/env python3
"""Reduced-precision attention rows: Q, K and V stored in bf16 (and f16) against the f32 path of
the same run, in paired rounds (each round runs every case back to back in one attn_bench
process, so load drifting on a shared machine moves both sides of a ratio alike; ratios are
round medians).

  - dense: BF16 dense attention >= 1.6x our f32 dense attention (H=12, d=64, causal) on CPUs
    with AVX512-BF16; elsewhere the ratio is reported (f16 dense as information);
  - key lists over BF16 rows: GFLOP/s per kept entry >= 50% of the f32 dense kernel's at the
    same N, for top-256 and top-1638 at N = 4096 and 16384 (the f32 key lists as information).

Prints the CPU's relevant features and the kernel set that ran, one table with PASS/FAIL, and
writes <out>/precision-results.json.

Usage: /usr/bin/python3 tests/bench/precision_rows.py --build build/native --out build/bench
       [--rounds 5] [--sizes 4096,16384]
"""
import argparse
import json
import os
import subprocess
import sys

HEADS, DIM = 12, 64
TARGETS = {"bf16_dense_speedup": 1.6, "bf16_key_lists_fraction_of_f32_dense": 0.5}


def cpu_features():
    flags, model = set(), "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    want = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "avx512_fp16", "amx_bf16",
            "amx_tile"]
    return model, [w for w in want if w in flags], "avx512_bf16" in flags


def run_round(build, out_dir, sizes):
    exe = os.path.join(build, "tests", "bench", "attn_bench")
    if not os.path.exists(exe):
        sys.exit("precision_rows: %s not found (build target attn_bench first)" % exe)
    ns = "|".join(str(n) for n in sizes)
    pattern = "^(cpu_dense|cpu_dense_bf16|cpu_dense_f16|cpu_gather_top256|cpu_gather_top1638|" \
              "cpu_gather_top256_bf16|cpu_gather_top1638_bf16)/n:(%s)(/|$)" % ns
    raw = os.path.join(out_dir, "gbench-precision.json")
    env = dict(os.environ, ATTN_BENCH_REPS="1")
    subprocess.run([exe, "--benchmark_filter=" + pattern, "--benchmark_out=" + raw,
                    "--benchmark_out_format=json"], env=env, check=True, stdout=subprocess.DEVNULL)
    with open(raw) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        name = b["run_name"].split("/iterations")[0]
        b["seconds"] = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        out[name] = b
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build/native")
    ap.add_argument("--out", default="build/bench")
    # Five rounds: this machine's speed flips between two states ~20% apart over seconds, and a
    # round whose two sides ran in different states is an outlier the median of five outvotes.
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="4096,16384")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",")]
    model, feats, has_bf16 = cpu_features()
    rounds = [run_round(args.build, args.out, sizes) for _ in range(args.rounds)]
    mid = lambda xs: sorted(xs)[len(xs) // 2]
    useful_dense = lambda n: 2.0 * HEADS * n * (n + 1) * DIM  # 4d per visible entry
    label = rounds[0]["cpu_dense_bf16/n:%d" % sizes[0]].get("label", "")
    isa = next((w.split("=", 1)[1] for w in label.split() if w.startswith("isa=")), "?")

    checks, ratios, rows = [], {}, []
    for n in sizes:
        dense = [r["cpu_dense/n:%d" % n]["seconds"] for r in rounds]
        rows.append(("dense f32", n, mid(dense), useful_dense(n) / mid(dense) / 1e9))
        for prec in ("bf16", "f16"):
            key = "cpu_dense_%s/n:%d" % (prec, n)
            t = [r[key]["seconds"] for r in rounds]
            per_round = sorted(r["cpu_dense/n:%d" % n]["seconds"] / r[key]["seconds"] for r in rounds)
            ratios["%s_dense_speedup_%d" % (prec, n)] = mid(per_round)
            rows.append(("dense %s" % prec, n, mid(t), useful_dense(n) / mid(t) / 1e9))
            name = "%s dense vs f32 dense, N=%d (same run)" % (prec.upper(), n)
            measured = "%.2fx (rounds %.2f-%.2f)" % (mid(per_round), per_round[0], per_round[-1])
            if prec == "bf16" and has_bf16:
                checks.append((name, measured, ">= 1.6x", mid(per_round) >= TARGETS["bf16_dense_speedup"]))
            else:
                checks.append(("  info: " + name, measured, "", None))
        for k in (256, 1638):
            for prec in ("", "_bf16"):
                key = "cpu_gather_top%d%s/n:%d" % (k, prec, n)
                t = [r[key]["seconds"] for r in rounds]
                per_round = sorted((r[key]["useful_flops"] / r[key]["seconds"]) /
                                   (useful_dense(n) / r["cpu_dense/n:%d" % n]["seconds"]) for r in rounds)
                gf = rounds[0][key]["useful_flops"] / mid(t) / 1e9
                rows.append(("top-%d key lists %s" % (k, prec[1:] or "f32"), n, mid(t), gf))
                ratios["key_lists_top%d%s_fraction_of_f32_dense_%d" % (k, prec, n)] = mid(per_round)
                name = "key lists top-%d over %s rows, N=%d: GFLOP/s per kept entry / f32 dense's" % (
                    k, "BF16" if prec else "f32", n)
                measured = "%.0f%% (rounds %.0f-%.0f%%)" % (100 * mid(per_round), 100 * per_round[0],
                                                         100 * per_round[-1])
                if prec:
                    checks.append((name, measured, ">= 50%",
                                   mid(per_round) >= TARGETS["bf16_key_lists_fraction_of_f32_dense"]))
                else:
                    checks.append(("  info: " + name, measured, "", None))

    lines = ["CPU: %s; features: %s; kernel set: %s; %d paired rounds" % (model, " ".join(feats), isa, args.rounds),
             "", "%-28s %7s %12s %10s" % ("case", "N", "median s", "GFLOP/s")]
    for case, n, t, gf in rows:
        lines.append("%-28s %7d %12.4f %10.1f" % (case, n, t, gf))
    lines += ["", "%-86s %-26s %-9s %s" % ("named ratio", "measured", "target", "result")]
    ok = True
    for name, val, target, res in checks:
        lines.append("%-86s %-26s %-9s %s" % (name, val, target, "" if res is None else ("PASS" if res else "FAIL")))
        ok = ok and res is not False
    print("\n".join(lines))
    with open(os.path.join(args.out, "precision-results.json"), "w") as f:
        json.dump({"cpu": model, "features": feats, "isa": isa, "rounds": rounds, "ratios": ratios,
                   "targets": TARGETS,
                   "checks": [{"name": c[0], "measured": c[1], "target": c[2], "pass": c[3]} for c in checks]},
                  f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
