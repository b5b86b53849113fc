#!/usr/bin/python3
"""Golden outputs for head ablation and activation patching (tests/app/test_interventions.cpp).

Reads the tiny random GPT-2 and Llama checkpoints of tests/ref/goldens/{gpt2,llama} (written by
make_goldens.py), runs its own float64 NumPy forward pass of each architecture, written here
from the published model definitions, with interventions on the per-head attention outputs
(before the output projection) and on the residual stream after a block, and writes under
tests/ref/goldens/interventions/<model>/:

  ids.npy, corrupt_ids.npy           i4 [N]  the input and a corrupted copy of it
  zero_<L>_<H>.npy, mean_<L>_<H>.npy f8 [N, vocab]  logits with that head ablated
  zero_multi.npy                     f8 [N, vocab]  logits with the heads of multi.json ablated
  patch_heads.npy                    f8 [L, H]  activation patching effects over heads
  patch_positions.npy                f8 [L, N]  ... over (layer, position) of the residual stream
  patch_patterns.npy                 f8 [L, H]  pattern patching: a head attends with the clean
                                                run's pattern over the corrupt run's values
  patch.json                         target and foil ids, LD clean and corrupt

effect = (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt), LD = logit(target) - logit(foil) at
the last position. Deterministic; no network. Run: /usr/bin/python3 tests/ref/make_intervention_goldens.py
"""

import json
import math
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDENS = os.path.join(HERE, "goldens")
OUT = os.path.join(GOLDENS, "interventions")


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32"
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(e["shape"]).astype(np.float64)
    return out


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def rms_norm(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def softmax(s):
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(-1, keepdims=True)


def causal_attention(q, k, v, layer=-1, patterns=()):
    """q, k, v [H, N, d] -> per-head outputs [H, N, d] and patterns [H, N, N]; patterns lists
    (layer, head, P): that head attends with P instead."""
    n, d = q.shape[1], q.shape[2]
    s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
    s = np.where(np.triu(np.ones((n, n), dtype=bool), 1), -np.inf, s)
    p = softmax(s)
    for l, h, pat in patterns:
        if l == layer:
            p[h] = pat
    return p @ v, p


def edit_heads(o, layer, edits):
    """o [H, N, d]; edits: list of (mode, layer, head, values)."""
    o = o.copy()
    for mode, l, h, values in edits:
        if l != layer:
            continue
        if mode == "zero":
            o[h] = 0
        elif mode == "mean":
            o[h] = o[h].mean(0, keepdims=True)
        else:  # replace
            o[h] = values
    return o


def edit_resid(x, layer, edits):
    x = x.copy()
    for l, t, values in edits:
        if l == layer:
            x[t] = values
    return x


def gpt2_forward(w, cfg, ids, heads=(), resid=(), patterns=()):
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    eps = cfg["layer_norm_epsilon"]
    d = C // H
    n = len(ids)
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:n]
    outs, res, pats = [], [], []
    for l in range(L):
        b = f"transformer.h.{l}."
        h = layer_norm(x, w[b + "ln_1.weight"], w[b + "ln_1.bias"], eps)
        qkv = h @ w[b + "attn.c_attn.weight"] + w[b + "attn.c_attn.bias"]
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(n, H, d).transpose(1, 0, 2) for i in range(3))
        o, p = causal_attention(q, k, v, l, patterns)
        pats.append(p)
        o = edit_heads(o, l, heads)
        outs.append(o)
        x = x + o.transpose(1, 0, 2).reshape(n, C) @ w[b + "attn.c_proj.weight"] + \
            w[b + "attn.c_proj.bias"]
        h = layer_norm(x, w[b + "ln_2.weight"], w[b + "ln_2.bias"], eps)
        m = h @ w[b + "mlp.c_fc.weight"] + w[b + "mlp.c_fc.bias"]
        m = 0.5 * m * (1 + np.tanh(math.sqrt(2 / math.pi) * (m + 0.044715 * m ** 3)))
        x = x + m @ w[b + "mlp.c_proj.weight"] + w[b + "mlp.c_proj.bias"]
        x = edit_resid(x, l, resid)
        res.append(x)
    hs = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return hs @ w["transformer.wte.weight"].T, outs, res, pats


def llama_inv_freq(d, theta, scaling):
    inv = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    if not scaling:
        return inv
    factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for f in inv:
        wl = 2 * math.pi / f
        if wl < old / hi:
            out.append(f)
        elif wl > old / lo:
            out.append(f / factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append((1 - s) * f / factor + s * f)
    return np.array(out)


def rope(x, inv):
    n, half = x.shape[1], x.shape[2] // 2
    ang = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def llama_forward(w, cfg, ids, heads=(), resid=(), patterns=()):
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    L, eps = cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    inv = llama_inv_freq(D, cfg["rope_theta"], cfg.get("rope_scaling"))
    n = len(ids)
    x = w["model.embed_tokens.weight"][ids]
    outs, res, pats = [], [], []
    for l in range(L):
        b = f"model.layers.{l}."
        h = rms_norm(x, w[b + "input_layernorm.weight"], eps)
        split = lambda y, k: y.reshape(n, k, D).transpose(1, 0, 2)
        q = rope(split(h @ w[b + "self_attn.q_proj.weight"].T, H), inv)
        k = rope(split(h @ w[b + "self_attn.k_proj.weight"].T, KV), inv)
        v = split(h @ w[b + "self_attn.v_proj.weight"].T, KV)
        rep = H // KV
        o, p = causal_attention(q, np.repeat(k, rep, 0), np.repeat(v, rep, 0), l, patterns)
        pats.append(p)
        o = edit_heads(o, l, heads)
        outs.append(o)
        x = x + o.transpose(1, 0, 2).reshape(n, H * D) @ w[b + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[b + "post_attention_layernorm.weight"], eps)
        g = h @ w[b + "mlp.gate_proj.weight"].T
        u = h @ w[b + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[b + "mlp.down_proj.weight"].T
        x = edit_resid(x, l, resid)
        res.append(x)
    hs = rms_norm(x, w["model.norm.weight"], eps)
    return hs @ w["lm_head.weight"].T, outs, res, pats


def make(name, forward, corrupt_at, multi):
    folder = os.path.join(GOLDENS, name)
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    w = load_safetensors(os.path.join(folder, "model.safetensors"))
    ids = np.load(os.path.join(folder, "golden_ids.npy")).astype(np.int64).reshape(-1)
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "ids.npy"), ids.astype("<i4"))
    run = lambda i, **kw: forward(w, cfg, i, **kw)
    clean, c_outs, c_res, c_pats = run(ids)
    L, H = len(c_outs), c_outs[0].shape[0]
    for l in range(L):
        for h in range(H):
            for mode in ("zero", "mean"):
                logits = run(ids, heads=[(mode, l, h, None)])[0]
                np.save(os.path.join(out, f"{mode}_{l}_{h}.npy"), logits.astype("<f8"))
    logits = run(ids, heads=[("zero", l, h, None) for l, h in multi])[0]
    np.save(os.path.join(out, "zero_multi.npy"), logits.astype("<f8"))
    # Patching: the corrupt input changes a few tokens; target and foil are the clean and the
    # corrupt run's top tokens at the last position.
    corrupt = ids.copy()
    for t, v in corrupt_at:
        corrupt[t] = v
    np.save(os.path.join(out, "corrupt_ids.npy"), corrupt.astype("<i4"))
    bad = run(corrupt)[0]
    target = int(np.argmax(clean[-1]))
    foil = int(np.argmax(bad[-1]))
    if foil == target:
        foil = int(np.argsort(bad[-1])[-2])
    ld = lambda lg: lg[-1, target] - lg[-1, foil]
    ld_clean, ld_corrupt = ld(clean), ld(bad)
    n = len(ids)
    eff_h = np.zeros((L, H))
    for l in range(L):
        for h in range(H):
            eff_h[l, h] = (ld(run(corrupt, heads=[("replace", l, h, c_outs[l][h])])[0]) -
                           ld_corrupt) / (ld_clean - ld_corrupt)
    eff_p = np.zeros((L, n))
    for l in range(L):
        for t in range(n):
            eff_p[l, t] = (ld(run(corrupt, resid=[(l, t, c_res[l][t])])[0]) - ld_corrupt) / \
                (ld_clean - ld_corrupt)
    eff_a = np.zeros((L, H))
    for l in range(L):
        for h in range(H):
            eff_a[l, h] = (ld(run(corrupt, patterns=[(l, h, c_pats[l][h])])[0]) -
                           ld_corrupt) / (ld_clean - ld_corrupt)
    np.save(os.path.join(out, "patch_heads.npy"), eff_h.astype("<f8"))
    np.save(os.path.join(out, "patch_patterns.npy"), eff_a.astype("<f8"))
    np.save(os.path.join(out, "patch_positions.npy"), eff_p.astype("<f8"))
    with open(os.path.join(out, "patch.json"), "w") as f:
        json.dump({"target": target, "foil": foil, "ld_clean": float(ld_clean),
                   "ld_corrupt": float(ld_corrupt), "multi": multi,
                   "generator": "tests/ref/make_intervention_goldens.py",
                   "precision": "float64 NumPy"}, f, indent=2)
        f.write("\n")


def main():
    make("gpt2", gpt2_forward, [(1, 17), (6, 119)], [[0, 1], [1, 0]])
    make("llama", llama_forward, [(3, 17), (8, 21)], [[0, 0], [0, 3], [1, 2]])


if __name__ == "__main__":
    main()
