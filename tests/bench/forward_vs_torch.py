#!/usr/bin/python3
"""Forward pass of a GPT-2-small-shaped model (12 layers, 12 heads, 768 wide, vocab 50257),
random weights, 512 tokens, every attention pattern captured: attnscope (attn_bench BM_Forward)
beside Debian's PyTorch on the same weights, in one run: in f32 (OpenBLAS, on the kernel set
torch_peer.py chooses for this CPU) and, where PyTorch runs bf16 matmuls through oneDNN, in bf16
(weights and activations torch.bfloat16; information, no target).

  /usr/bin/python3 tests/bench/forward_vs_torch.py --build build/native

Writes the checkpoint (HF GPT2LMHeadModel naming, F32, ~500 MB) once under
<build>/bench/forward-gpt2-small, alternates rounds of both implementations, checks that their
logits and last-layer patterns agree, and prints one table (also saved as
<build>/bench/forward-vs-torch.json). Both use the same number of threads (--threads, default all
cores). Target: attnscope <= 1.0 s per pass and >= 1.5x faster than PyTorch f32.
"""

import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import configure_peer, peer_label, torch_bf16  # noqa: E402

if __name__ == "__main__":
    configure_peer()

import numpy as np  # noqa: E402
import torch  # noqa: E402

C, H, L, V, P = 768, 12, 12, 50257, 1024


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build/native", help="CMake build folder holding attn_bench")
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of both")
    p.add_argument("--iters", type=int, default=3, help="passes per round and implementation")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-bf16", action="store_true", help="skip the PyTorch bf16 peer")
    return p.parse_args()


def make_weights(seed):
    """GPT-2 initialisation (normal(0, 0.02), residual projections scaled, LN = (1, 0))."""
    g = torch.Generator().manual_seed(seed)
    rn = lambda *s, std=0.02: torch.randn(*s, generator=g) * std
    w = {"transformer.wte.weight": rn(V, C), "transformer.wpe.weight": rn(P, C, std=0.01)}
    proj_std = 0.02 / math.sqrt(2 * L)
    for l in range(L):
        b = f"transformer.h.{l}."
        w[b + "ln_1.weight"], w[b + "ln_1.bias"] = torch.ones(C), torch.zeros(C)
        w[b + "attn.c_attn.weight"], w[b + "attn.c_attn.bias"] = rn(C, 3 * C), rn(3 * C, std=0.01)
        w[b + "attn.c_proj.weight"], w[b + "attn.c_proj.bias"] = rn(C, C, std=proj_std), torch.zeros(C)
        w[b + "ln_2.weight"], w[b + "ln_2.bias"] = torch.ones(C), torch.zeros(C)
        w[b + "mlp.c_fc.weight"], w[b + "mlp.c_fc.bias"] = rn(C, 4 * C), rn(4 * C, std=0.01)
        w[b + "mlp.c_proj.weight"], w[b + "mlp.c_proj.bias"] = rn(4 * C, C, std=proj_std), torch.zeros(C)
    w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = torch.ones(C), torch.zeros(C)
    return w


def save_safetensors(path, tensors):
    header, offset = {}, 0
    for name in sorted(tensors):
        n = tensors[name].numel() * 4
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in sorted(tensors):
            f.write(tensors[name].contiguous().numpy().astype("<f4").tobytes())
    os.replace(path + ".tmp", path)


def prepare(folder, seed, tokens):
    os.makedirs(folder, exist_ok=True)
    stamp = os.path.join(folder, "seed.txt")
    w = make_weights(seed)
    if not (os.path.exists(stamp) and open(stamp).read() == str(seed)):
        save_safetensors(os.path.join(folder, "model.safetensors"), w)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
                       "n_embd": C, "n_head": H, "n_layer": L, "n_positions": P,
                       "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}, f)
        with open(stamp, "w") as f:
            f.write(str(seed))
    ids = torch.randint(0, V, (tokens,), generator=torch.Generator().manual_seed(seed + 1))
    np.save(os.path.join(folder, "ids.npy"), ids.numpy().astype("<i4"))
    return w, ids


@torch.inference_mode()
def torch_forward(w, ids):
    """GPT-2 in eager PyTorch; returns logits [N, V] and the attention probabilities of every
    layer ([H, N, N] each), as output_attentions=True would."""
    n = ids.shape[0]
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:n]
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    patterns = []
    for l in range(L):
        b = f"transformer.h.{l}."
        h = torch.nn.functional.layer_norm(x, (C,), w[b + "ln_1.weight"], w[b + "ln_1.bias"], 1e-5)
        qkv = torch.addmm(w[b + "attn.c_attn.bias"], h, w[b + "attn.c_attn.weight"])
        q, k, v = (t.view(n, H, C // H).transpose(0, 1) for t in qkv.split(C, dim=1))
        s = (q @ k.transpose(1, 2)) / math.sqrt(C // H)
        p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        patterns.append(p)
        a = (p @ v).transpose(0, 1).reshape(n, C)
        x = x + torch.addmm(w[b + "attn.c_proj.bias"], a, w[b + "attn.c_proj.weight"])
        h = torch.nn.functional.layer_norm(x, (C,), w[b + "ln_2.weight"], w[b + "ln_2.bias"], 1e-5)
        m = torch.nn.functional.gelu(torch.addmm(w[b + "mlp.c_fc.bias"], h, w[b + "mlp.c_fc.weight"]),
                                     approximate="tanh")
        x = x + torch.addmm(w[b + "mlp.c_proj.bias"], m, w[b + "mlp.c_proj.weight"])
    x = torch.nn.functional.layer_norm(x, (C,), w["transformer.ln_f.weight"],
                                       w["transformer.ln_f.bias"], 1e-5)
    return x @ w["transformer.wte.weight"].T, patterns


def run_torch(w, ids, iters):
    """Wall and process CPU seconds (all threads) per pass."""
    times, cpu, out = [], [], None
    for _ in range(iters):
        t, c = time.perf_counter(), time.process_time()
        out = torch_forward(w, ids)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return times, cpu, out


def run_attnscope(exe, folder, iters, threads):
    env = dict(os.environ, ATTN_FORWARD_MODEL=folder, ATTN_FORWARD_ITERS=str(iters),
               ATTNSCOPE_THREADS=str(threads))
    out = subprocess.run([exe, "--benchmark_filter=^BM_Forward/", "--benchmark_format=json"],
                         env=env, check=True, capture_output=True, text=True).stdout
    b = json.loads(out)["benchmarks"][0]
    return b


def bf16_weights(w):
    """The same weights in torch.bfloat16 (round to nearest even), for the bf16 peer."""
    return {k: v.to(torch.bfloat16) for k, v in w.items()}


def main():
    args = parse_args()
    exe = os.path.join(args.build, "tests", "bench", "attn_bench")
    if not os.path.exists(exe):
        sys.exit(f"forward_vs_torch: {exe} not found (build the attn_bench target first)")
    torch.set_num_threads(args.threads)
    folder = os.path.join(args.build, "bench", "forward-gpt2-small")
    w, ids = prepare(folder, args.seed, args.tokens)
    bf16 = {"usable": False, "why": "--no-bf16"} if args.no_bf16 else torch_bf16(args.threads)
    wb = bf16_weights(w) if bf16["usable"] else None
    run_torch(w, ids, 1)  # warm-up (allocator, OpenBLAS threads)
    if wb:
        run_torch(wb, ids, 1)
    cpp, tor, tbf, cpp_cpu, tor_cpu, tbf_cpu, load = [], [], [], [], [], [], []
    for _ in range(args.rounds):
        b = run_attnscope(exe, folder, args.iters, args.threads)
        # Per-pass times are not exported one by one; the min and median of the round are.
        cpp += [b["min_s"], b["median_s"]]
        cpp_cpu += [b["cpu_min_s"], b["cpu_median_s"]]
        load.append(b["load_s"])
        t, c, (logits, patterns) = run_torch(w, ids, args.iters)
        tor += t
        tor_cpu += c
        if wb:
            t, c, (logits_bf, _) = run_torch(wb, ids, args.iters)
            tbf += t
            tbf_cpu += c
    ours = np.load(os.path.join(folder, "attnscope_logits.npy"))
    ref = logits.numpy()
    logit_err = float(np.abs(ours - ref).max() / np.abs(ref).max())
    pat = np.load(os.path.join(folder, "attnscope_pattern_last.npy"))
    pat_err = float(np.abs(pat - patterns[-1].numpy()).max())
    a_med, t_med = statistics.median(cpp), statistics.median(tor)
    a_min, t_min = min(cpp), min(tor)
    a_cpu, t_cpu = statistics.median(cpp_cpu), statistics.median(tor_cpu)
    peer = peer_label()
    res = {"tokens": args.tokens, "threads": args.threads, "torch": torch.__version__,
           "peer": peer, "build": args.build, "attnscope_median_s": a_med, "attnscope_min_s": a_min,
           "torch_median_s": t_med, "torch_min_s": t_min, "speedup_median": t_med / a_med,
           "speedup_min": t_min / a_min, "attnscope_load_s": min(load),
           "attnscope_cpu_median_s": a_cpu, "torch_cpu_median_s": t_cpu,
           "speedup_cpu": t_cpu / a_cpu, "load_average": os.getloadavg(),
           "logits_max_rel_diff": logit_err, "pattern_last_max_abs_diff": pat_err,
           "target": "attnscope <= 1.0 s and >= 1.5x faster than PyTorch f32",
           "met": a_med <= 1.0 and t_med / a_med >= 1.5,
           "bf16": {"peer": bf16.get("kernel"), "why": bf16["why"]}}
    if tbf:
        bf_med, bf_min, bf_cpu = statistics.median(tbf), min(tbf), statistics.median(tbf_cpu)
        bf_err = float(np.abs(ours - logits_bf.float().numpy()).max() / np.abs(ref).max())
        res["bf16"].update({"torch_median_s": bf_med, "torch_min_s": bf_min, "torch_cpu_median_s": bf_cpu,
                            "speedup_median": bf_med / a_med, "speedup_min": bf_min / a_min,
                            "speedup_cpu": bf_cpu / a_cpu, "logits_max_rel_diff_vs_attnscope": bf_err})
    print(f"GPT-2 small shape, random weights, {args.tokens} tokens, all {L} attention patterns "
          f"captured, {args.threads} threads, {args.build}")
    print(f"  {'':24}{'median s':>10}{'min s':>10}{'CPU s':>10}")
    print(f"  {'attnscope':24}{a_med:10.3f}{a_min:10.3f}{a_cpu:10.3f}   (checkpoint load "
          f"{min(load):.3f} s)")
    print(f"  {'PyTorch ' + torch.__version__ + ' f32':24}{t_med:10.3f}{t_min:10.3f}{t_cpu:10.3f}   "
          f"({peer})")
    if tbf:
        print(f"  {'PyTorch ' + torch.__version__ + ' bf16':24}{bf_med:10.3f}{bf_min:10.3f}{bf_cpu:10.3f}   "
              f"({bf16['kernel']}; logits max rel diff {bf_err:.1e} from attnscope's f32)")
    else:
        print(f"  {'PyTorch bf16':24}{'-':>10}{'-':>10}{'-':>10}   (skipped: {bf16['why']})")
    print(f"  speed-up over f32 (median / min / CPU time):  {t_med / a_med:.2f}x / {t_min / a_min:.2f}x / "
          f"{t_cpu / a_cpu:.2f}x   target: <= 1.0 s and >= 1.5x -> "
          f"{'met' if res['met'] else 'NOT met'}")
    if tbf:
        print(f"  speed-up over bf16 (median / min / CPU time): {bf_med / a_med:.2f}x / "
              f"{bf_min / a_min:.2f}x / {bf_cpu / a_cpu:.2f}x   (information)")
    print(f"  load average during the run: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores (wall times include time spent waiting for a core)")
    print(f"  agreement: logits max rel diff {logit_err:.2e}, last-layer pattern max abs diff "
          f"{pat_err:.2e}")
    with open(os.path.join(args.build, "bench", "forward-vs-torch.json"), "w") as f:
        json.dump(res, f, indent=2)
    return 0 if logit_err < 1e-3 and pat_err < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
