"""What every NumPy/PyTorch peer of the benchmarks shares: OpenBLAS on the fastest kernel set that
computes correctly on this CPU, chosen once per script by probing, and PyTorch's BF16 matmul path.

The rule. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset (some machines export them, forcing
older kernels) and OpenBLAS picks its kernels by CPU model. When it picks a real modern kernel set
(Haswell, Zen, SkylakeX, Cooperlake, SapphireRapids) that one runs. When it falls back to a generic
one (Prescott, Core2, Nehalem, ...: OpenBLAS 0.3.21 does on CPU models it does not know, e.g. some
AMD EPYCs), SkylakeX, Zen and Haswell are forced in turn, each in a child process (a kernel set
the CPU cannot run dies of SIGILL there, not here), each checked against NumPy float64 computed
without BLAS (SGEMM and DGEMM, odd and transposed shapes, a guard row after the output) and timed
on a 1024^3 SGEMM; the fastest correct one runs. Every peer row records which ran, e.g.
"OpenBLAS SkylakeX (auto)" or "OpenBLAS Haswell (forced: auto picked Prescott)".

  from torch_peer import configure_peer, peer_label   # before importing numpy or torch
  if __name__ == "__main__":
      configure_peer()        # probes, then re-executes the script once with the kernel's env
  ...
  peer_label()                # "OpenBLAS SkylakeX (auto)", checked against the loaded library

A peer run in a child process instead takes its environment from peer_env(). Run this file to
see every candidate probed and timed, and PyTorch's BF16 matmul path:

  /usr/bin/python3 tests/bench/torch_peer.py
"""

import ctypes
import json
import os
import platform
import subprocess
import sys

_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_CHOICE_VAR = "ATTNSCOPE_PEER_OPENBLAS"  # the decision, passed to the re-executed script as JSON
MODERN = ("haswell", "zen", "skylakex", "cooperlake", "sapphirerapids")
CANDIDATES = ("SkylakeX", "Zen", "Haswell")
PYTHON = "/usr/bin/python3"  # Debian's, with NumPy and PyTorch on OpenBLAS

# One candidate in a child: the core OpenBLAS reports, the worst normalised error of SGEMM and
# DGEMM against float64 computed without BLAS (np.einsum), and 1024^3 SGEMM GFLOP/s.
_PROBE = r"""
import ctypes, json, time
import numpy as np

def corename():
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "openblas" in path and ".so" in path:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
    return "unknown"

rng = np.random.default_rng(0)
def err(a, b, c):
    # |C - AB| over |A||B|, both in float64 without BLAS; a NaN or Inf reads as a failure.
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = np.einsum("ik,kj->ij", a64, b64)
    scale = np.einsum("ik,kj->ij", np.abs(a64), np.abs(b64)).max()
    e = float(np.abs(c.astype(np.float64) - ref).max() / scale)
    return e if np.isfinite(e) else float("inf")

worst = {"sgemm": 0.0, "dgemm": 0.0}
guard_ok = True
# decode's one row, odd edges, the threaded path (384^3), and B transposed as torch passes it.
for m, k, n, bt in ((1, 768, 2304, False), (7, 300, 129, True), (257, 131, 199, False),
                    (384, 384, 384, True), (64, 64, 64, False)):
    for dt, key in ((np.float32, "sgemm"), (np.float64, "dgemm")):
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((n, k) if bt else (k, n)).astype(dt)
        bb = b.T if bt else b
        buf = np.full((m + 1, n), 1234.5, dtype=dt)     # the last row guards against overruns
        np.matmul(a, bb, out=buf[:m])
        guard_ok = guard_ok and bool((buf[m] == dt(1234.5)).all())
        worst[key] = max(worst[key], err(a, bb, buf[:m]))
n = 1024
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
c = a @ b
rows = rng.choice(n, 16, replace=False)               # the timed product, checked on 16 rows
worst["sgemm"] = max(worst["sgemm"], err(a[rows], b, c[rows]))
ts = []
for _ in range(7):
    t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
ts.sort()
print(json.dumps({"core": corename(), "sgemm_err": worst["sgemm"], "dgemm_err": worst["dgemm"],
                  "guard_ok": guard_ok, "gflops": 2.0 * n**3 / ts[len(ts) // 2] / 1e9}))
"""
SGEMM_TOL, DGEMM_TOL = 1e-4, 1e-11  # a wrong kernel is off by O(1); rounding is ~1e-7 / ~1e-16


def _base_env(env=None):
    env = dict(os.environ if env is None else env)
    for v in _VARS + (_CHOICE_VAR,):
        env.pop(v, None)
    return env


def probe(coretype=None, timeout=120):
    """Runs the probe in a child with OPENBLAS_CORETYPE=coretype (None: unset, OpenBLAS picks).
    Returns {"requested", "core", "ok", "why", "gflops", "sgemm_err", "dgemm_err"}."""
    env = _base_env()
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    r = {"requested": coretype or "auto", "core": None, "ok": False, "gflops": None}
    try:
        p = subprocess.run([PYTHON, "-c", _PROBE], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        r["why"] = "timed out after %d s" % timeout
        return r
    if p.returncode != 0:
        sig = -p.returncode if p.returncode < 0 else None
        r["why"] = ("killed by signal %d%s" % (sig, " (SIGILL: the CPU lacks its instructions)"
                                               if sig == 4 else "")) if sig else \
            "exit %d: %s" % (p.returncode, (p.stderr.strip().splitlines() or [""])[-1][:200])
        return r
    r.update(json.loads(p.stdout.strip().splitlines()[-1]))
    if coretype and r["core"].lower() != coretype.lower():
        r["why"] = "not honoured (OpenBLAS ran %s)" % r["core"]
    elif not r["guard_ok"]:
        r["why"] = "wrote past its output"
    elif not (r["sgemm_err"] <= SGEMM_TOL and r["dgemm_err"] <= DGEMM_TOL):
        r["why"] = "wrong results (sgemm err %.1e, dgemm err %.1e)" % (r["sgemm_err"], r["dgemm_err"])
    else:
        r["ok"], r["why"] = True, "correct"
    return r


def is_modern(core):
    return bool(core) and core.lower() in MODERN


def choose_openblas(auto=None, candidates=None):
    """The decision (not cached): {"core", "forced", "auto_core", "label", "probes"}. auto and
    candidates are probe() results to decide on (for tests); by default they are measured."""
    auto = auto or probe()
    probes = [auto]
    if auto["ok"] and is_modern(auto["core"]):
        chosen, forced = auto, False
    elif platform.machine() not in ("x86_64", "AMD64"):
        chosen, forced = auto, False  # the candidates are x86 kernel sets
    else:
        cands = candidates if candidates is not None else [probe(c) for c in CANDIDATES]
        probes += cands
        good = [c for c in cands if c["ok"]]
        if good:
            chosen, forced = max(good, key=lambda c: c["gflops"]), True
        else:
            chosen, forced = auto, False
    auto_core = auto["core"] or "unknown (%s)" % auto["why"]
    if forced:
        label = "OpenBLAS %s (forced: auto picked %s)" % (chosen["core"], auto_core)
    elif is_modern(auto["core"]):
        label = "OpenBLAS %s (auto)" % auto["core"] if auto["ok"] else \
            "OpenBLAS %s (auto, %s)" % (auto["core"], auto["why"])
    else:
        label = "OpenBLAS %s (auto; no real kernel set ran correctly)" % auto_core
    return {"core": chosen["core"], "forced": forced, "auto_core": auto["core"], "label": label,
            "gflops_1024": chosen["gflops"], "probes": probes}


_choice = None


def openblas_choice():
    """The decision for this script: from the environment the script was re-executed with, or
    probed now (once per process)."""
    global _choice
    if _choice is None:
        _choice = json.loads(os.environ[_CHOICE_VAR]) if _CHOICE_VAR in os.environ \
            else choose_openblas()
    return _choice


def peer_env(env=None):
    """The environment a peer process runs in: both variables unset, the chosen core forced when
    OpenBLAS's own pick was generic, and the decision passed on."""
    c = openblas_choice()
    out = _base_env(env)
    if c["forced"]:
        out["OPENBLAS_CORETYPE"] = c["core"]
    out[_CHOICE_VAR] = json.dumps(c)
    return out


def configure_peer():
    """Call before importing numpy or torch: re-executes the script once in peer_env() (OpenBLAS
    reads its variables when it is loaded)."""
    if _CHOICE_VAR in os.environ:
        return
    os.execve(sys.executable, [sys.executable] + sys.argv, peer_env())


def openblas_core():
    """The kernel set the OpenBLAS loaded in this process runs ("SkylakeX", "Prescott", ...)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {l.split()[-1] for l in f if "openblas" in l and ".so" in l}
    except OSError:
        paths = set()
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return lib.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "unknown"


def peer_label():
    """What a peer row records for the f32 peer in this process: the decision's label, or a warning
    when the loaded OpenBLAS runs another core than the one chosen."""
    c = openblas_choice()
    loaded = openblas_core()
    if loaded != "unknown" and c["core"] and loaded.lower() != c["core"].lower():
        return "%s, BUT the loaded OpenBLAS runs %s" % (c["label"], loaded)
    return c["label"]


# PyTorch's BF16 matmul in a child: correctness against float64, speed beside f32 addmm, and the
# oneDNN implementation that ran (oneDNN's verbose lines); no oneDNN line means PyTorch's own loops ran.
_BF16_PROBE = r"""
import json, sys, time
import numpy as np
import torch
torch.set_num_threads(int(sys.argv[1]))
g = torch.Generator().manual_seed(0)
def gflops(dt, m=512, k=768, n=3072, reps=5):
    a, w, b = (torch.randn(*s, generator=g).to(dt) for s in ((m, k), (k, n), (n,)))
    torch.addmm(b, a, w)
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); torch.addmm(b, a, w); ts.append(time.perf_counter() - t)
    return 2.0 * m * k * n / sorted(ts)[reps // 2] / 1e9
a = torch.randn(96, 768, generator=g).bfloat16()
w = torch.randn(768, 257, generator=g).bfloat16()
with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
    c = (a @ w).double().numpy()
a64, w64 = a.double().numpy(), w.double().numpy()
ref = np.einsum("ik,kj->ij", a64, w64)
err = float(np.abs(c - ref).max() / np.einsum("ik,kj->ij", np.abs(a64), np.abs(w64)).max())
out = {"err": err if np.isfinite(err) else float("inf"), "gflops_bf16": gflops(torch.bfloat16),
       "gflops_f32": gflops(torch.float32), "torch": torch.__version__}
print("RESULT " + json.dumps(out), flush=True)
"""
BF16_TOL = 2e-2  # bf16 outputs round to 8 bits of mantissa (~4e-3); accumulation is in f32


def torch_bf16(threads, timeout=180):
    """Whether PyTorch runs BF16 matmuls here, and how: {"usable", "kernel", "why", "err",
    "gflops_bf16", "gflops_f32"}. usable only when the result is correct and oneDNN runs it
    (PyTorch 1.13's fallback for CPUs without AVX-512BW is scalar loops, no peer worth timing)."""
    env = peer_env()
    r = {"usable": False, "kernel": None}
    try:
        p = subprocess.run([PYTHON, "-c", _BF16_PROBE, str(threads)], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        r["why"] = "bf16 matmul probe timed out after %d s (no fast path)" % timeout
        return r
    res = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not res:
        r["why"] = "bf16 matmul failed: %s" % (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:200]
        return r
    r.update(json.loads(res[-1][len("RESULT "):]))
    impls = sorted({l.split(",")[4] for l in p.stdout.splitlines()
                    if l.startswith(("onednn_verbose,exec", "dnnl_verbose,exec")) and
                    ",matmul," in l and "bf16" in l})
    r["kernel"] = "oneDNN %s" % "+".join(impls) if impls else "PyTorch's own loops (no oneDNN)"
    if not r["err"] <= BF16_TOL:
        r["why"] = "wrong bf16 results (err %.1e)" % r["err"]
    elif not impls:
        r["why"] = "oneDNN does not run bf16 matmuls on this CPU"
    else:
        r["usable"], r["why"] = True, "correct (err %.1e)" % r["err"]
    return r


def main():
    """Every candidate probed (auto included), the decision, and PyTorch's BF16 path."""
    auto = probe()
    cands = [probe(c) for c in CANDIDATES]
    for r in [auto] + cands:
        print("  %-9s -> %-11s %7s GFLOP/s  sgemm err %-8s dgemm err %-8s %s" % (
            r["requested"], r["core"] or "-", "%.0f" % r["gflops"] if r["gflops"] else "-",
            "%.1e" % r["sgemm_err"] if "sgemm_err" in r else "-",
            "%.1e" % r["dgemm_err"] if "dgemm_err" in r else "-", r["why"]))
    c = choose_openblas(auto, cands)
    print("peer f32 kernel: %s" % c["label"])
    os.environ[_CHOICE_VAR] = json.dumps(c)
    global _choice
    _choice = c
    b = torch_bf16(os.cpu_count())
    print("PyTorch bf16 matmul: %s, %s; 512x768x3072 addmm %.0f GFLOP/s bf16 vs %.0f f32" % (
        b["kernel"], b["why"], b.get("gflops_bf16") or 0, b.get("gflops_f32") or 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
