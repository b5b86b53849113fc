"""Every registered variant at its default parameters, timed through `attnscope run`.

One random causal problem (H=12, d=64, N=16384 unless quick) per variant, each in its own
process beside the dense run `run` always makes first in that process, so every ratio is paired
(dense and the variant back to back, whatever the machine's load does between processes).
Selection, kernel and wall time are kept apart; wall minus both is the run's own bookkeeping.
Used by run_bench.py, which prints the table and the named targets with the rest of the bench.
"""
import json
import os
import subprocess
import tempfile

HEADS, DIM = 12, 64
# The dynamic selectors named by the targets: selection <= 10% of the dense kernel (the exact
# top-k oracle scores every key: select + attend <= 1.5x dense); vertical-slash and H2O at their
# default density: select + kernel <= 0.1x the dense kernel; bookkeeping <= 25% of it.
SELECTORS = ("topk", "top_p", "block_topk", "vertical_slash", "h2o", "sketch_walk")
TARGETS = {"select_fraction": 0.10, "topk_total": 1.5, "low_density_total": 0.10,
           "bookkeeping_fraction": 0.25}


def registered_specs(exe):
    out = subprocess.run([exe, "variants", "--json"], capture_output=True, text=True, check=True)
    specs = []
    for piece in json.loads(out.stdout):
        kind, pid = piece["kind"], piece["id"]
        if kind in ("pattern", "selective", "approximation"):
            specs.append((pid, kind == "approximation"))
        elif kind in ("score-mod", "normaliser") and pid != "softmax":
            specs.append(("dense+" + pid, False))
    return specs


def measure(build, n):
    exe = os.path.join(build, "app", "attnscope")
    if not os.path.exists(exe):
        raise SystemExit("variant_rows: %s not found (build target attnscope first)" % exe)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "run.json")
        for spec, approx in registered_specs(exe):
            cmd = [exe, "run", "-n", str(n), "--n-heads", str(HEADS), "-d", str(DIM), "-v", spec,
                   "--no-metrics", "--json", out_json]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                why = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
                rows.append({"spec": spec, "error": why})
                continue
            with open(out_json) as f:
                res = json.load(f)["variants"]
            d, v = res[0], res[-1]
            rows.append({"spec": v["variant"], "piece": spec, "approximation": approx, "n": n,
                         "density": v["density"],
                         "select_s": v["select_seconds"], "kernel_s": v["kernel_seconds"],
                         "wall_s": v["wall_seconds"], "dense_kernel_s": d["kernel_seconds"],
                         "dense_wall_s": d["wall_seconds"], "dense_select_s": d["select_seconds"]})
    return rows


def report(rows):
    """Table lines, named checks (name, measured, target, pass) and the raw rows."""
    n = next((r["n"] for r in rows if "n" in r), 0)
    hdr = "%-58s %8s %10s %10s %10s %9s %9s %8s" % (
        "variant (defaults; N=%d, H=%d, d=%d, causal)" % (n, HEADS, DIM), "density", "select s",
        "kernel s", "wall s", "sel/dense", "speedup", "bookkp")
    lines = ["every registered variant, each paired with dense in its own run "
             "(speedup = dense kernel / (select + kernel); bookkp = (wall - select - kernel) / "
             "dense kernel)", hdr, "-" * len(hdr)]
    checks = []
    worst_book = (0.0, "")
    for r in rows:
        if "error" in r:
            lines.append("%-58s %s" % (r["piece"] if "piece" in r else r["spec"], "not run: " + r["error"][:90]))
            continue
        dk = r["dense_kernel_s"]
        total = r["select_s"] + r["kernel_s"]
        book = (r["wall_s"] - total) / dk
        dense_book = (r["dense_wall_s"] - r["dense_select_s"] - dk) / dk
        # Approximations do their own work outside the select/kernel split (delta's strided
        # pass, the feature maps): their column shows it, the bookkeeping target is run's own.
        for b, what in ((book, r["spec"]), (dense_book, "dense")):
            if b > worst_book[0] and (what == "dense" or not r["approximation"]):
                worst_book = (b, what)
        lines.append("%-58s %8.4f %10.4f %10.4f %10.4f %9.3f %8.2fx %8.3f" % (
            r["spec"][:58], r["density"], r["select_s"], r["kernel_s"], r["wall_s"],
            r["select_s"] / dk, dk / total if total > 0 else float("inf"), book))
        piece = r["piece"]
        if piece in SELECTORS and piece != "topk":
            f = r["select_s"] / dk
            checks.append(("%s selection / dense kernel, N=%d" % (piece, r["n"]),
                           "%.3f (%.3f s / %.3f s)" % (f, r["select_s"], dk),
                           "<= %.2f" % TARGETS["select_fraction"], f <= TARGETS["select_fraction"]))
        if piece == "topk":
            f = total / dk
            checks.append(("topk (exact oracle, k=%s) select + attend / dense kernel, N=%d" % (
                r["spec"].split("k=")[-1].rstrip(")"), r["n"]),
                "%.2f (%.3f + %.3f s / %.3f s)" % (f, r["select_s"], r["kernel_s"], dk),
                "<= %.1f" % TARGETS["topk_total"], f <= TARGETS["topk_total"]))
        if piece in ("vertical_slash", "h2o"):
            f = total / dk
            checks.append(("%s (density %.3f) select + kernel / dense kernel, N=%d" % (piece, r["density"], r["n"]),
                           "%.3f (%.3f + %.3f s / %.3f s)" % (f, r["select_s"], r["kernel_s"], dk),
                           "<= %.2f" % TARGETS["low_density_total"], f <= TARGETS["low_density_total"]))
    if any("error" not in r for r in rows):
        checks.append(("run bookkeeping (wall - select - kernel) / dense kernel, worst pattern",
                       "%.3f (%s)" % worst_book, "<= %.2f" % TARGETS["bookkeeping_fraction"],
                       worst_book[0] <= TARGETS["bookkeeping_fraction"]))
    return lines, checks, rows
