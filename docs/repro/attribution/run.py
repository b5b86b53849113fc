#!/usr/bin/python3
"""Attention beside attribution, over held-out data, with `attnscope attribute`.

For each sample the CLI runs once:
    attnscope attribute --model M (--ids ... | --image PNG) --method all --faithfulness
                        --steps S --random-orders R [--baseline mean] --json FILE
and this script aggregates the JSON files:
  * rank agreement (Spearman, Kendall tau-b, as the CLI computes them over the ranked units)
    between the attention methods (attention, rollout, flow) and grad_input,
    integrated_gradients, attnlrp, occlusion, and of chefer and attn_grad against occlusion:
    mean over samples with a bootstrap 95% interval (resampling samples);
  * the same pairs recomputed here on absolute values of the signed methods' scores, and
    (text) without the first token (<|endoftext|>, the attention sink);
  * every method's deletion AOPC (probability p and logit z) and insertion area, and the
    random-order baseline, mean with a bootstrap 95% interval, plus the share of samples on
    which a method's AOPC beats the random orders'.

Data (none of it seen in training):
  default-text    windows of the held-out KJV chapters of models/train/kjv.py (every 40th
                  chapter; needs Debian's bible-kjv, else the first held-out chapters in
                  docs/repro/streaming/kjv_heldout.txt), tokenised by models/train/bpe.py with
                  the model's own vocab/merges, each window <|endoftext|> + (tokens - 1) tokens,
                  as the model was trained (BOS, then text from an arbitrary offset); windows
                  evenly spaced over the held-out text. Target: the top prediction at the last
                  position.
  default-vision  Fashion-MNIST test images (Debian's dataset-fashion-mnist, t10k files; the
                  model trained on the 60,000 training images only), evenly spaced indices,
                  written as PNGs into a temporary folder. Target: the top prediction.
                  Baseline: each image's mean pixel (--baseline mean).

Writes results.json beside this script and prints markdown tables.
    /usr/bin/python3 docs/repro/attribution/run.py [--exe build/release/app/attnscope]
"""

import argparse
import concurrent.futures
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

sys.dont_write_bytecode = True  # importing models/train/*.py leaves no __pycache__ there
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
TRAIN = os.path.join(ROOT, "models", "train")
FMNIST = "/usr/share/datasets/fashion-mnist"

ATTENTION = ["attention", "rollout", "flow"]
REFERENCES = ["grad_input", "integrated_gradients", "attnlrp", "occlusion"]
PAIRS = [(a, b) for a in ATTENTION for b in REFERENCES] + [("chefer", "occlusion"),
                                                            ("attn_grad", "occlusion")]
METHODS = ["attention", "rollout", "flow", "grad_input", "integrated_gradients", "attn_grad",
           "chefer", "attnlrp", "occlusion"]
SIGNED = {"grad_input", "integrated_gradients", "attn_grad", "attnlrp", "occlusion"}


# ---- data -------------------------------------------------------------------------------------

def heldout_text():
    """(text, source description): models/train/kjv.py's held-out chapters."""
    sys.path.insert(0, TRAIN)
    import kjv  # noqa: E402
    if shutil.which("bible") is not None:
        return kjv.split_text()[1], ("held-out chapters of models/train/kjv.py (chapter i with "
                                     f"i % {kjv.HELDOUT_EVERY} == {kjv.HELDOUT_OFFSET}, 30 of "
                                     "1189), via Debian's bible-kjv")
    path = os.path.join(ROOT, "docs", "repro", "streaming", "kjv_heldout.txt")
    print(f"note: `bible` missing (apt-get install bible-kjv); using {path}", flush=True)
    return open(path, encoding="utf-8").read(), ("docs/repro/streaming/kjv_heldout.txt (the "
                                                 "first held-out chapters of models/train/kjv.py)")


def text_windows(n, length):
    sys.path.insert(0, TRAIN)
    import bpe  # noqa: E402
    tok = bpe.Tokenizer.load(os.path.join(ROOT, "assets", "models", "default-text"))
    text, source = heldout_text()
    ids = tok.encode(text)
    bos = tok.encode(bpe.ENDOFTEXT)
    assert len(bos) == 1, bos
    body = length - 1
    if len(ids) < body + n:
        raise SystemExit(f"held-out text has {len(ids)} tokens, too few for {n} windows")
    starts = [int(round(i * (len(ids) - body) / max(n - 1, 1))) for i in range(n)]
    windows = [{"start_token": s, "ids": bos + ids[s:s + body],
                "text": tok.decode(ids[s:s + body])} for s in starts]
    return windows, {"source": source, "heldout_tokens": len(ids), "bos_id": bos[0]}


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_png_gray(path, img):
    h, w = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def test_images(n, folder):
    images = read_idx(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz"))
    stride = len(images) // n
    out = []
    for i in range(n):
        idx = i * stride
        path = os.path.join(folder, f"test_{idx:05d}.png")
        write_png_gray(path, images[idx])
        out.append({"test_index": idx, "label": int(labels[idx]), "path": path})
    return out


# ---- statistics -------------------------------------------------------------------------------

def avg_ranks(x):
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        r[order[i:j + 1]] = 0.5 * (i + j) + 1
        i = j + 1
    return r


def spearman(x, y):
    rx, ry = avg_ranks(np.asarray(x, float)), avg_ranks(np.asarray(y, float))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    d = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / d) if d > 0 else float("nan")


def kendall_tau_b(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    iu = np.triu_indices(len(x), 1)
    dx = np.sign((x[:, None] - x[None, :])[iu])
    dy = np.sign((y[:, None] - y[None, :])[iu])
    s = (dx * dy).sum()
    d = np.sqrt((dx != 0).sum() * (dy != 0).sum())
    return float(s / d) if d > 0 else float("nan")


def bootstrap(values, rng, resamples):
    """Mean and percentile 95% interval over samples (NaNs dropped)."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if len(v) == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    idx = rng.integers(0, len(v), size=(resamples, len(v)))
    means = v[idx].mean(axis=1)
    return {"mean": float(v.mean()), "lo": float(np.percentile(means, 2.5)),
            "hi": float(np.percentile(means, 97.5)), "n": int(len(v))}


# ---- running ----------------------------------------------------------------------------------

def run_cli(exe, args, json_path):
    cmd = [exe, "attribute"] + args + ["--json", json_path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd)}\n{p.stderr}")
    with open(json_path) as f:
        return json.load(f), p.stdout


def run_all(opts, jobs):
    """Runs the CLI on each (args, json_path), --jobs at a time; yields results in order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        futures = [pool.submit(run_cli, opts.exe, a, path) for a, path in jobs]
        for f in futures:
            yield f.result()


def common_args(opts, units):
    steps = opts.steps if opts.steps > 0 else units
    return ["--method", "all", "--faithfulness", "--steps", str(steps),
            "--random-orders", str(opts.random_orders), "--threads", str(opts.threads)]


def scores_of(d):
    ranked = d["units"]["ranked"]
    return {m["id"]: np.asarray(m["scores"], float)[ranked] for m in d["methods"]}, ranked


def summarise_sample(d, text):
    s, ranked = scores_of(d)
    agree = {(r["a"], r["b"]): r for r in d["agreement"]}
    out = {"target": d["target"]["label"], "p": d["target"]["probability"],
           "z": d["target"]["z"], "units": len(ranked), "pairs": {}, "curves": {}}
    for a, b in PAIRS:
        r = agree.get((a, b)) or agree.get((b, a))
        x, y = s[a], s[b]
        ax = np.abs(x) if a in SIGNED else x
        by = np.abs(y) if b in SIGNED else y
        e = {"spearman": r["spearman"], "kendall": r["kendall_tau"],
             "top_k": r["top_k_overlap"], "k": r["k"],
             "spearman_here": spearman(x, y), "kendall_here": kendall_tau_b(x, y),
             "spearman_abs": spearman(ax, by), "kendall_abs": kendall_tau_b(ax, by)}
        if text:
            e["spearman_no_bos"] = spearman(x[1:], y[1:])
            e["kendall_no_bos"] = kendall_tau_b(x[1:], y[1:])
        out["pairs"][f"{a}/{b}"] = e
    for c in d["faithfulness"]["curves"]:
        out["curves"][c["order"]] = {k: c[k] for k in ("aopc_p", "aopc_z", "insertion_p",
                                                       "insertion_z")}
    # ties: units sharing their score with another unit (flow saturates), and the first unit's
    # (text: <|endoftext|>) rank in each method
    out["tied_share"] = {m: float(1 - len(np.unique(v)) / len(v)) for m, v in s.items()}
    out["top_is_first_unit"] = {m: bool(np.argmax(v) == 0) for m, v in s.items()}
    out["top_is_last_unit"] = {m: bool(np.argmax(v) == len(v) - 1) for m, v in s.items()}
    if text:  # recency: Spearman of each method's scores with the token's position
        pos = np.arange(len(ranked), dtype=float)
        out["position_spearman"] = {m: spearman(v, pos) for m, v in s.items()}
        out["position_spearman_no_bos"] = {m: spearman(v[1:], pos[1:]) for m, v in s.items()}
    for m in d["methods"]:
        if m["id"] == "attnlrp":
            out["lrp_relevance_over_z"] = m["relevance_sum"] / d["target"]["z"]
        if m["id"] == "integrated_gradients":
            out["ig_sum_over_zdiff"] = float(np.sum(m["scores"])) / m["z_difference"]
    return out


def aggregate(samples, rng, resamples, text):
    agg = {"pairs": {}, "curves": {}, "beats_random": {}, "tied_share": {},
           "top_is_first_unit": {}, "top_is_last_unit": {}, "paired": {}}
    keys = ["spearman", "kendall", "top_k", "spearman_abs", "kendall_abs"]
    if text:
        keys += ["spearman_no_bos", "kendall_no_bos"]
    for a, b in PAIRS:
        name = f"{a}/{b}"
        agg["pairs"][name] = {k: bootstrap([s["pairs"][name][k] for s in samples], rng, resamples)
                              for k in keys}
        diff = max(max(abs(s["pairs"][name]["spearman"] - s["pairs"][name]["spearman_here"]),
                       abs(s["pairs"][name]["kendall"] - s["pairs"][name]["kendall_here"]))
                   for s in samples)
        agg["pairs"][name]["max_abs_diff_cli_vs_here"] = diff
    orders = METHODS + ["random"]
    for m in orders:
        agg["curves"][m] = {k: bootstrap([s["curves"][m][k] for s in samples], rng, resamples)
                            for k in ("aopc_p", "aopc_z", "insertion_p", "insertion_z")}
    for m in METHODS:
        agg["beats_random"][m] = {
            k: float(np.mean([s["curves"][m][k] > s["curves"]["random"][k] for s in samples]))
            for k in ("aopc_p", "aopc_z", "insertion_p", "insertion_z")}
        agg["tied_share"][m] = float(np.mean([s["tied_share"][m] for s in samples]))
        agg["top_is_first_unit"][m] = float(np.mean([s["top_is_first_unit"][m]
                                                     for s in samples]))
        agg["top_is_last_unit"][m] = float(np.mean([s["top_is_last_unit"][m] for s in samples]))
    # paired differences (each resample takes the same samples for both terms)
    for a in ("rollout", "flow"):
        for b in REFERENCES:
            for k in ("spearman", "kendall"):
                agg["paired"][f"{k}: {a}/{b} - attention/{b}"] = bootstrap(
                    [s["pairs"][f"{a}/{b}"][k] - s["pairs"][f"attention/{b}"][k]
                     for s in samples], rng, resamples)
    for m in METHODS:
        for base in ("random", "attention", "grad_input"):
            if m == base:
                continue
            for k in ("aopc_p", "aopc_z", "insertion_p", "insertion_z"):
                agg["paired"][f"{k}: {m} - {base}"] = bootstrap(
                    [s["curves"][m][k] - s["curves"][base][k] for s in samples], rng, resamples)
    if text:
        for k in ("position_spearman", "position_spearman_no_bos"):
            agg[k] = {m: bootstrap([s[k][m] for s in samples], rng, resamples) for m in METHODS}
    agg["target_p"] = bootstrap([s["p"] for s in samples], rng, resamples)
    agg["lrp_relevance_over_z"] = bootstrap([s["lrp_relevance_over_z"] for s in samples], rng,
                                            resamples)
    agg["lrp_relevance_over_z"]["median"] = float(np.median([s["lrp_relevance_over_z"]
                                                             for s in samples]))
    agg["ig_sum_over_zdiff"] = bootstrap([s["ig_sum_over_zdiff"] for s in samples], rng,
                                         resamples)
    return agg


# ---- tables -----------------------------------------------------------------------------------

def fmt(b, digits=3):
    if b["mean"] is None:
        return "n/a"
    return f"{b['mean']:.{digits}f} [{b['lo']:.{digits}f}, {b['hi']:.{digits}f}]"


def correlation_table(results):
    names = [k for k in ("text", "vision") if k in results["datasets"]]
    head = "| pair | " + " | ".join(f"{n} Spearman | {n} Kendall tau-b" for n in names) + " |"
    lines = [head, "|---|" + "---|---|" * len(names)]
    for a, b in PAIRS:
        row = [f"{a} / {b}"]
        for n in names:
            p = results["datasets"][n]["aggregate"]["pairs"][f"{a}/{b}"]
            row += [fmt(p["spearman"]), fmt(p["kendall"])]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def variant_table(results):
    names = [k for k in ("text", "vision") if k in results["datasets"]]
    cols, head = [], ["pair"]
    for n in names:
        cols.append((n, "spearman_abs"))
        head.append(f"{n} Spearman, abs. values")
        if n == "text":
            cols.append((n, "spearman_no_bos"))
            head.append("text Spearman, without <|endoftext|>")
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---|" * len(cols)]
    for a, b in PAIRS:
        row = [f"{a} / {b}"]
        for n, k in cols:
            row.append(fmt(results["datasets"][n]["aggregate"]["pairs"][f"{a}/{b}"][k]))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def faithfulness_table(agg):
    lines = ["| order | deletion AOPC (p) | deletion AOPC (z) | insertion area (p) | "
             "insertion area (z) | AOPC (p) > random |",
             "|---|---|---|---|---|---|"]
    for m in METHODS + ["random"]:
        c = agg["curves"][m]
        beats = f"{100 * agg['beats_random'][m]['aopc_p']:.0f}%" if m != "random" else ""
        lines.append(f"| {m} | {fmt(c['aopc_p'])} | {fmt(c['aopc_z'], 2)} | "
                     f"{fmt(c['insertion_p'])} | {fmt(c['insertion_z'], 2)} | {beats} |")
    return "\n".join(lines)


def paired_corr_table(results):
    names = [k for k in ("text", "vision") if k in results["datasets"]]
    lines = ["| difference | " + " | ".join(f"{n}" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for a in ("rollout", "flow"):
        for b in REFERENCES:
            key = f"spearman: {a}/{b} - attention/{b}"
            lines.append(f"| {a}/{b} - attention/{b} | " + " | ".join(
                fmt(results["datasets"][n]["aggregate"]["paired"][key]) for n in names) + " |")
    return "\n".join(lines)


def paired_faith_table(agg):
    bases = ("random", "attention", "grad_input")
    lines = ["| order | " + " | ".join(f"{name} - {b}" for name in ("AOPC (z)", "insertion (z)")
                                      for b in bases) + " |", "|---|" + "---|" * 6]
    for m in METHODS:
        cells = []
        for k in ("aopc_z", "insertion_z"):
            for base in bases:
                cells.append("" if m == base else fmt(agg["paired"][f"{k}: {m} - {base}"], 2))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rounded(x):
    if isinstance(x, float):
        return float(f"{x:.6g}") if np.isfinite(x) else None
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def write_results(path, results):
    """Aggregates indented; each per-sample record on one line."""
    r = rounded(results)
    per = {}
    for n, ds in r["datasets"].items():  # dict order: the placeholders are filled in this order
        per[n] = ds["per_sample"]
        for s in per[n]:
            for e in s["pairs"].values():  # equal to the CLI's (max_abs_diff_cli_vs_here)
                e.pop("spearman_here", None)
                e.pop("kendall_here", None)
        ds["per_sample"] = "@@"
    text = json.dumps(r, indent=1)
    for n in per:
        lines = ",\n".join("  " + json.dumps(s, separators=(",", ":")) for s in per[n])
        text = text.replace('"per_sample": "@@"', '"per_sample": [\n' + lines + "\n ]", 1)
    with open(path, "w") as f:
        f.write(text + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--exe", default=os.path.join(ROOT, "build", "release", "app", "attnscope"))
    p.add_argument("--text-windows", type=int, default=40)
    p.add_argument("--text-tokens", type=int, default=56,
                   help="tokens per window, <|endoftext|> included")
    p.add_argument("--images", type=int, default=40)
    p.add_argument("--steps", type=int, default=0,
                   help="faithfulness steps (0: one per unit: the window's tokens, 49 patches)")
    p.add_argument("--random-orders", type=int, default=16)
    p.add_argument("--threads", type=int, default=1, help="the CLI's --threads (0: all cores)")
    p.add_argument("--jobs", type=int, default=2, help="CLI processes run at once")
    p.add_argument("--bootstrap", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", default="", help="keep the per-sample JSON files in this folder")
    p.add_argument("--out", default=os.path.join(HERE, "results.json"))
    opts = p.parse_args()
    if not os.path.exists(opts.exe):
        raise SystemExit(f"{opts.exe} missing: build the project first")

    t_start = time.time()
    work = opts.keep or tempfile.mkdtemp(prefix="attnscope-attribution-")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(opts.seed)
    version = subprocess.run([opts.exe, "--version"], capture_output=True, text=True).stdout
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    results = {"attnscope": version.strip(), "commit": commit,
               "settings": {k: v for k, v in vars(opts).items() if k not in ("exe", "out",
                                                                            "keep", "jobs")},
               "pairs": [f"{a}/{b}" for a, b in PAIRS], "datasets": {}}
    try:
        if opts.text_windows > 0:
            windows, info = text_windows(opts.text_windows, opts.text_tokens)
            samples, t0 = [], time.time()
            args = common_args(opts, opts.text_tokens)
            jobs = [(["--model", "default-text", "--ids", ",".join(map(str, w["ids"]))] + args,
                     os.path.join(work, f"text_{i:03d}.json")) for i, w in enumerate(windows)]
            for i, (w, (d, _)) in enumerate(zip(windows, run_all(opts, jobs))):
                s = summarise_sample(d, text=True)
                s["start_token"] = w["start_token"]
                samples.append(s)
                print(f"text {i + 1}/{len(windows)}: token {w['start_token']}, target "
                      f"{s['target']!r} p={s['p']:.3f}  ({time.time() - t0:.0f} s)", flush=True)
            results["datasets"]["text"] = {
                "model": "default-text", "data": info, "samples": len(samples),
                "tokens_per_window": opts.text_tokens,
                "command": "attnscope attribute --model default-text --ids <|endoftext|>,... "
                           + " ".join(args) + " --json FILE",
                "seconds": time.time() - t0,
                "aggregate": aggregate(samples, rng, opts.bootstrap, text=True),
                "per_sample": samples}
        if opts.images > 0:
            images = test_images(opts.images, work)
            samples, t0 = [], time.time()
            args = common_args(opts, 49) + ["--baseline", "mean"]
            jobs = [(["--model", "default-vision", "--image", im["path"]] + args,
                     os.path.join(work, f"vision_{i:03d}.json")) for i, im in enumerate(images)]
            for i, (im, (d, _)) in enumerate(zip(images, run_all(opts, jobs))):
                s = summarise_sample(d, text=False)
                s.update({"test_index": im["test_index"], "label": im["label"],
                          "correct": d["target"]["id"] == im["label"]})
                samples.append(s)
                print(f"image {i + 1}/{len(images)}: test #{im['test_index']}, target "
                      f"{s['target']!r} p={s['p']:.3f} {'ok' if s['correct'] else 'wrong'}  "
                      f"({time.time() - t0:.0f} s)", flush=True)
            agg = aggregate(samples, rng, opts.bootstrap, text=False)
            agg["accuracy"] = float(np.mean([s["correct"] for s in samples]))
            results["datasets"]["vision"] = {
                "model": "default-vision",
                "data": {"source": "Fashion-MNIST test set (t10k), Debian dataset-fashion-mnist",
                         "test_indices": [im["test_index"] for im in images]},
                "samples": len(samples),
                "command": "attnscope attribute --model default-vision --image test_NNNNN.png "
                           + " ".join(args) + " --json FILE",
                "seconds": time.time() - t0, "aggregate": agg, "per_sample": samples}
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)
    results["seconds"] = time.time() - t_start
    write_results(opts.out, results)

    print(f"\n## Rank agreement (mean over samples [bootstrap 95% interval])\n")
    print(correlation_table(results))
    print(f"\n## Spearman on absolute values of signed scores; text without <|endoftext|>\n")
    print(variant_table(results))
    print("\n## Paired differences of Spearman: rollout or flow minus attention\n")
    print(paired_corr_table(results))
    for n, ds in results["datasets"].items():
        agg = ds["aggregate"]
        print(f"\n## Faithfulness, {ds['model']} ({ds['samples']} samples)\n")
        print(faithfulness_table(agg))
        print(f"\nPaired differences, {ds['model']}:\n")
        print(paired_faith_table(agg))
        print(f"\nmean target p {fmt(agg['target_p'])}; AttnLRP input relevance / z "
              f"{fmt(agg['lrp_relevance_over_z'])} (median "
              f"{agg['lrp_relevance_over_z']['median']:.2f}); IG sum / (z - z0) "
              f"{fmt(agg['ig_sum_over_zdiff'])}")
        print("units tied with another unit (mean share): " + ", ".join(
            f"{m} {100 * v:.0f}%" for m, v in agg["tied_share"].items() if v > 0))
        print("first unit ranked top (share of samples): " + ", ".join(
            f"{m} {100 * v:.0f}%" for m, v in agg["top_is_first_unit"].items()))
        print("last unit ranked top (share of samples): " + ", ".join(
            f"{m} {100 * v:.0f}%" for m, v in agg["top_is_last_unit"].items()))
        if "position_spearman_no_bos" in agg:
            print("Spearman of scores with token position, without <|endoftext|>: " + ", ".join(
                f"{m} {fmt(v, 2)}" for m, v in agg["position_spearman_no_bos"].items()))
        if "accuracy" in agg:
            print(f"top prediction = label on {100 * agg['accuracy']:.0f}% of the images")
        print(f"max |CLI - recomputed| over pairs and samples: "
              f"{max(v['max_abs_diff_cli_vs_here'] for v in agg['pairs'].values()):.2e}")
    print(f"\nwrote {opts.out}; {results['seconds']:.0f} s in all")


if __name__ == "__main__":
    main()
