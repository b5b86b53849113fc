#!/usr/bin/python3
"""Reference gradients and AttnLRP relevance for the C++ reverse pass (models/arch/backward.*).

Reads the tiny random checkpoints that make_goldens.py committed under tests/ref/goldens/
{gpt2,llama,qwen2,bert,vit,deit}/, runs an independent float64 PyTorch forward of each
architecture whose input is a leaf tensor, and differentiates one scalar with autograd:

  input  text: each token's embedding row before position/type embeddings, X [N, C]
               (wte[ids], embed_tokens[ids], word_embeddings[ids]);
         image: the preprocessed pixels of golden_pixels.npy, [3, H, W].
  z      text: logit[P, id] - logit[P, foil] at P = N - 2 (the LM head, or BERT's MLM head);
         image: logit[id] - logit[foil] over the classes;
         id = the argmax of those logits, foil = the runner-up.

It writes, per model folder (little-endian f32 .npy, C order):

  grad_input.npy        dz/d(input)                              [N, C] or [3, H, W]
  grad_pattern_<l>.npy  dz/dA_l, A_l the softmax probabilities   [H, N, N] (masked entries too:
                        they are dO V^T like any other)
  grad_resid_<l>.npy    dz/d(residual stream after block l)      [N, C] (BERT: the output of
                        the block's second LayerNorm)
  lrp_input.npy         AttnLRP relevance at the input (Achtibat et al. 2024), input * grad of a
                        forward rewritten so that its gradient follows the LRP rules (see Rules)
  ig_input.npy          gpt2, vit and llama only: integrated gradients, zero baseline, 64 midpoint
                        steps
  grad_target.json      position (text only), id, foil, z, lrp_sum, and for gpt2/vit/llama ig_sum
                        and z_baseline

and prints its self-checks: logits against golden_logits.npy, central finite differences against
dz/dX, the LRP forward's logits against the plain one, and IG completeness.

Run with Debian's PyTorch:  /usr/bin/python3 tests/ref/make_grad_goldens.py
It is deterministic (no randomness beyond a fixed-seed choice of checked elements) and needs no
network. Not run by CI: its outputs are committed.
"""

import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens as mg  # noqa: E402  (shared RoPE, head splitting, bicubic grid, npy writer)

GOLDENS = mg.OUT
DT = torch.float64
IG_STEPS = 64


# ----------------------------------------------------------------------------- checkpoint

def load_safetensors(path):
    """name -> float64 tensor. Only what the goldens use: F32, little-endian, no metadata needs."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        a, b = e["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype="<f4").reshape(e["shape"])
        out[name] = torch.tensor(arr.astype(np.float64), dtype=DT)
    return out


def read_json(path):
    with open(path) as f:
        return json.load(f)


# ----------------------------------------------------------------------------- propagation rules

GATES = {  # act(x) = x * gate(x); the gate is the identity rule's ratio act(x)/x, without 0/0
    "gelu_new": lambda x: 0.5 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "gelu": lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2))),
    "silu": torch.sigmoid,
}


class Rules:
    """The few places where AttnLRP's gradient form differs from the ordinary gradient.

    Each rewrite leaves the forward value unchanged (0.5 * y + 0.5 * y == y exactly) and only
    changes what flows backwards, so one forward serves both the plain gradient (lrp=False) and
    the relevance (lrp=True, relevance = input * grad)."""

    def __init__(self, lrp):
        self.lrp = lrp

    def norm_denominator(self, d):
        # Identity rule on the division by std / rms: the denominator is a constant.
        return d.detach() if self.lrp else d

    def act(self, x, kind):
        # Identity rule: relevance passes an elementwise activation unchanged.
        g = GATES[kind](x)
        return x * (g.detach() if self.lrp else g)

    def bilinear(self, a, b, op):
        # Uniform rule: each factor of a product takes half of its relevance.
        if not self.lrp:
            return op(a, b)
        return 0.5 * op(a, b.detach()) + 0.5 * op(a.detach(), b)


GRAD, LRP = Rules(False), Rules(True)


class Trace:
    """Collects the attention probabilities and the residual stream after each block; with
    retain=True they keep their .grad after backward()."""

    def __init__(self, retain):
        self.retain, self.patterns, self.resid = retain, [], []

    def pattern(self, p):
        if self.retain:
            p.retain_grad()
        self.patterns.append(p)

    def block_out(self, x):
        if self.retain:
            x.retain_grad()
        self.resid.append(x)


NO_TRACE = Trace(False)


def layer_norm(x, g, b, eps, R):
    xc = x - x.mean(-1, keepdim=True)  # mean subtraction is linear: kept under LRP
    sd = torch.sqrt((xc * xc).mean(-1, keepdim=True) + eps)
    return xc / R.norm_denominator(sd) * g + b


def rms_norm(x, g, eps, R):
    rms = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return x / R.norm_denominator(rms) * g


def attend(q, k, v, causal, R, trace):
    """q [H, N, d], k/v [H, N, d] (grouped heads already repeated) -> [N, H*d]."""
    h, n, d = q.shape
    s = R.bilinear(q, k, lambda a, b: a @ b.transpose(1, 2)) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    trace.pattern(p)
    o = R.bilinear(p, v, lambda a, b: a @ b)
    return o.transpose(0, 1).reshape(n, h * d)


# ----------------------------------------------------------------------------- forwards
# Each builder returns (x0, forward): x0 the input value, forward(x, R, trace) -> logits, with
# everything downstream of x (position/type embeddings, CLS tokens, ...) added inside.

def gpt2(w, cfg, folder):
    ids = torch.tensor(np.load(os.path.join(folder, "golden_ids.npy")).astype(np.int64))
    C, H, L, eps = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["layer_norm_epsilon"]
    act = cfg["activation_function"]
    N = len(ids)

    def forward(X, R, trace):
        x = X + w["transformer.wpe.weight"][:N]
        for l in range(L):
            b = f"transformer.h.{l}."
            h = layer_norm(x, w[b + "ln_1.weight"], w[b + "ln_1.bias"], eps, R)
            q, k, v = (h @ w[b + "attn.c_attn.weight"] + w[b + "attn.c_attn.bias"]).split(C, dim=1)
            a = attend(mg.heads(q, H), mg.heads(k, H), mg.heads(v, H), True, R, trace)
            x = x + a @ w[b + "attn.c_proj.weight"] + w[b + "attn.c_proj.bias"]
            h = layer_norm(x, w[b + "ln_2.weight"], w[b + "ln_2.bias"], eps, R)
            m = R.act(h @ w[b + "mlp.c_fc.weight"] + w[b + "mlp.c_fc.bias"], act)
            x = x + m @ w[b + "mlp.c_proj.weight"] + w[b + "mlp.c_proj.bias"]
            trace.block_out(x)
        hs = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps, R)
        return hs @ w["transformer.wte.weight"].T  # tied head: the weight, not the leaf X

    return w["transformer.wte.weight"][ids], forward


def llama(w, cfg, folder):
    """Llama and Qwen2 (q/k/v biases when the checkpoint has them, tied head when it has no
    lm_head.weight)."""
    ids = torch.tensor(np.load(os.path.join(folder, "golden_ids.npy")).astype(np.int64))
    H, KV, L = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    D = cfg.get("head_dim", cfg["hidden_size"] // H)
    eps, act = cfg["rms_norm_eps"], cfg["hidden_act"]
    inv = mg.rope_inv_freq(D, cfg["rope_theta"], cfg.get("rope_scaling"))
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]

    def linear(x, n):
        y = x @ w[n + ".weight"].T
        return y + w[n + ".bias"] if n + ".bias" in w else y

    def forward(X, R, trace):
        x = X
        for l in range(L):
            b = f"model.layers.{l}."
            h = rms_norm(x, w[b + "input_layernorm.weight"], eps, R)
            q = mg.apply_rope(mg.heads(linear(h, b + "self_attn.q_proj"), H), inv)
            k = mg.apply_rope(mg.heads(linear(h, b + "self_attn.k_proj"), KV), inv)
            v = mg.heads(linear(h, b + "self_attn.v_proj"), KV)
            rep = H // KV
            a = attend(q, k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0), True, R, trace)
            x = x + linear(a, b + "self_attn.o_proj")
            h = rms_norm(x, w[b + "post_attention_layernorm.weight"], eps, R)
            g = R.act(linear(h, b + "mlp.gate_proj"), act)
            m = R.bilinear(g, linear(h, b + "mlp.up_proj"), lambda p, u: p * u)
            x = x + linear(m, b + "mlp.down_proj")
            trace.block_out(x)
        return rms_norm(x, w["model.norm.weight"], eps, R) @ head.T

    return w["model.embed_tokens.weight"][ids], forward


def bert(w, cfg, folder):
    ids = torch.tensor(np.load(os.path.join(folder, "golden_ids.npy")).astype(np.int64))
    types = torch.tensor(np.load(os.path.join(folder, "golden_token_types.npy")).astype(np.int64))
    H, L, eps, act = cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"], cfg["hidden_act"]
    N = len(ids)
    e = "bert.embeddings."
    lin = lambda x, n: x @ w[n + ".weight"].T + w[n + ".bias"]

    def forward(X, R, trace):
        x = X + w[e + "position_embeddings.weight"][:N] + w[e + "token_type_embeddings.weight"][types]
        x = layer_norm(x, w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], eps, R)
        for l in range(L):
            b = f"bert.encoder.layer.{l}."
            q, k, v = (mg.heads(lin(x, b + "attention.self." + n), H) for n in ("query", "key", "value"))
            a = attend(q, k, v, False, R, trace)
            x = layer_norm(x + lin(a, b + "attention.output.dense"),
                           w[b + "attention.output.LayerNorm.weight"],
                           w[b + "attention.output.LayerNorm.bias"], eps, R)
            m = R.act(lin(x, b + "intermediate.dense"), act)
            x = layer_norm(x + lin(m, b + "output.dense"), w[b + "output.LayerNorm.weight"],
                           w[b + "output.LayerNorm.bias"], eps, R)
            trace.block_out(x)  # post-LN: the stream the next block reads
        t = R.act(lin(x, "cls.predictions.transform.dense"), act)
        t = layer_norm(t, w["cls.predictions.transform.LayerNorm.weight"],
                       w["cls.predictions.transform.LayerNorm.bias"], eps, R)
        return t @ w[e + "word_embeddings.weight"].T + w["cls.predictions.bias"]

    return w[e + "word_embeddings.weight"][ids], forward


def vit(w, cfg, folder):
    """ViT, and DeiT with its distillation token when the checkpoint has one."""
    pixels = torch.tensor(np.load(os.path.join(folder, "golden_pixels.npy")).astype(np.float64))
    distill = cfg["model_type"] == "deit"
    pre = "deit." if distill else "vit."
    C, H, p = cfg["hidden_size"], cfg["num_attention_heads"], cfg["patch_size"]
    L, eps, act = cfg["num_hidden_layers"], cfg["layer_norm_eps"], cfg["hidden_act"]
    e = pre + "embeddings."
    lin = lambda x, n: x @ w[n + ".weight"].T + w[n + ".bias"]

    def forward(pix, R, trace):
        conv = F.conv2d(pix[None], w[e + "patch_embeddings.projection.weight"],
                        w[e + "patch_embeddings.projection.bias"], stride=p)[0]  # [C, gh, gw]
        gh, gw = conv.shape[1:]
        special = [w[e + "cls_token"][0, 0]] + ([w[e + "distillation_token"][0, 0]] if distill else [])
        S = len(special)
        pos = w[e + "position_embeddings"][0]
        g = int(round(math.sqrt(pos.shape[0] - S)))
        grid = pos[S:].reshape(g, g, C)
        if (gh, gw) != (g, g):
            grid = mg.bicubic_grid(grid, gh, gw)
        x = torch.cat([torch.stack(special), conv.flatten(1).T]) + torch.cat([pos[:S], grid.reshape(-1, C)])
        for l in range(L):
            b = f"{pre}encoder.layer.{l}."
            h = layer_norm(x, w[b + "layernorm_before.weight"], w[b + "layernorm_before.bias"], eps, R)
            q, k, v = (mg.heads(lin(h, b + "attention.attention." + n), H) for n in ("query", "key", "value"))
            x = x + lin(attend(q, k, v, False, R, trace), b + "attention.output.dense")
            h = layer_norm(x, w[b + "layernorm_after.weight"], w[b + "layernorm_after.bias"], eps, R)
            x = x + lin(R.act(lin(h, b + "intermediate.dense"), act), b + "output.dense")
            trace.block_out(x)
        hs = layer_norm(x, w[pre + "layernorm.weight"], w[pre + "layernorm.bias"], eps, R)
        if distill:  # DeiTForImageClassificationWithTeacher: the mean of both heads
            return (lin(hs[0], "cls_classifier") + lin(hs[1], "distillation_classifier")) / 2
        return lin(hs[0], "classifier")

    return pixels, forward


MODELS = {"gpt2": gpt2, "llama": llama, "qwen2": llama, "bert": bert, "vit": vit, "deit": vit}
IG_MODELS = ("gpt2", "vit", "llama")
# Llama (RMSNorm, no position embedding added to the input) is scale-invariant in its input away
# from 0: z(alpha x) jumps from z(0) to most of z(x) by alpha ~ 1e-5, a step that 64 midpoint
# steps do not resolve. Its IG is written as computed, and its completeness gap is reported, not
# checked.
IG_INCOMPLETE = ("llama",)


# ----------------------------------------------------------------------------- per model

def top_two(row):
    order = torch.argsort(row, descending=True)
    return int(order[0]), int(order[1])


def grad_of(forward, x0, R, z_of, trace=NO_TRACE):
    """(z, logits, dz/dx) for one forward from a fresh leaf at x0."""
    x = x0.clone().requires_grad_(True)
    logits = forward(x, R, trace)
    z = z_of(logits)
    z.backward()
    return float(z), logits.detach(), x.grad.detach()


def finite_difference_check(forward, x0, grad, z_of, rows, count=6, h=1e-5):
    """Central differences on the elements of largest |grad| and a few random others with a
    non-negligible gradient (relative error on tiny gradients says nothing). Rows is the
    range of leading indices that can influence z (a causal LM cannot see past P)."""
    gen = torch.Generator().manual_seed(0)
    g = grad.clone()
    g[rows:] = 0
    flat = g.abs().flatten()
    candidates = torch.nonzero(flat > 0.05 * flat.max()).flatten()
    pick = [int(flat.argmax())] + [int(i) for i in candidates[torch.randperm(len(candidates), generator=gen)[:count - 1]]]
    worst = 0.0
    with torch.no_grad():
        for i in pick:
            e = torch.zeros(x0.numel(), dtype=DT)
            e[i] = h
            e = e.reshape(x0.shape)
            fd = (float(z_of(forward(x0 + e, GRAD, NO_TRACE))) -
                  float(z_of(forward(x0 - e, GRAD, NO_TRACE)))) / (2 * h)
            worst = max(worst, abs(fd - float(grad.flatten()[i])) / abs(float(grad.flatten()[i])))
    return worst, len(pick)


def integrated_gradients(forward, x0, z_of):
    """Zero baseline, midpoint Riemann sum: IG = x * mean_k grad(x * (k + 0.5) / steps)."""
    total = torch.zeros_like(x0)
    for k in range(IG_STEPS):
        total += grad_of(forward, x0 * ((k + 0.5) / IG_STEPS), GRAD, z_of)[2]
    with torch.no_grad():
        z_base = float(z_of(forward(torch.zeros_like(x0), GRAD, NO_TRACE)))
    return x0 * total / IG_STEPS, z_base


def make(name):
    folder = os.path.join(GOLDENS, name)
    cfg = read_json(os.path.join(folder, "config.json"))
    w = load_safetensors(os.path.join(folder, "model.safetensors"))
    x0, forward = MODELS[name](w, cfg, folder)
    image = x0.dim() == 3
    print(f"{name}: input {list(x0.shape)}")

    # The target: from the plain logits, at N - 2 for text.
    with torch.no_grad():
        logits = forward(x0, GRAD, NO_TRACE)
    golden = torch.tensor(np.load(os.path.join(folder, "golden_logits.npy")).astype(np.float64))
    diff = float((logits - golden).abs().max())
    print(f"  logits vs golden_logits.npy: max |diff| = {diff:.3e}  {'ok' if diff < 1e-4 else 'FAIL'}")
    ok = diff < 1e-4
    if image:
        position = None
        target, foil = top_two(logits)
        z_of = lambda lg: lg[target] - lg[foil]
    else:
        position = x0.shape[0] - 2
        target, foil = top_two(logits[position])
        z_of = lambda lg: lg[position, target] - lg[position, foil]

    # Plain gradient, with the patterns and the residual stream kept in the graph.
    trace = Trace(retain=True)
    z, _, grad = grad_of(forward, x0, GRAD, z_of, trace)
    mg.save_npy(folder, "grad_input", grad.numpy())
    for l, p in enumerate(trace.patterns):
        mg.save_npy(folder, f"grad_pattern_{l}", p.grad.numpy())
    for l, r in enumerate(trace.resid):
        mg.save_npy(folder, f"grad_resid_{l}", r.grad.numpy())
    rows = x0.shape[0] if image else position + 1
    fd_err, fd_n = finite_difference_check(forward, x0, grad, z_of, rows)
    print(f"  finite differences on {fd_n} elements of dz/dX: max rel err = {fd_err:.3e}  "
          f"{'ok' if fd_err < 1e-6 else 'FAIL'}")
    ok &= fd_err < 1e-6

    # AttnLRP: same forward values, LRP rules on the way back.
    z_lrp, logits_lrp, grad_lrp = grad_of(forward, x0, LRP, z_of)
    same = float((logits_lrp - logits).abs().max())
    print(f"  LRP forward vs plain forward: max |logit diff| = {same:.3e}  "
          f"{'ok' if same < 1e-12 else 'FAIL'}")
    ok &= same < 1e-12
    lrp = x0 * grad_lrp
    mg.save_npy(folder, "lrp_input", lrp.numpy())

    meta = {} if image else {"position": position}
    meta.update({"id": target, "foil": foil, "z": z, "lrp_sum": float(lrp.sum())})
    if name in IG_MODELS:
        ig, z_base = integrated_gradients(forward, x0, z_of)
        mg.save_npy(folder, "ig_input", ig.numpy())
        ig_sum = float(ig.sum())
        rel = abs(ig_sum - (z - z_base)) / abs(z - z_base)
        checked = name not in IG_INCOMPLETE
        print(f"  IG completeness: ig_sum = {ig_sum:.6f}, z - z_baseline = {z - z_base:.6f}, "
              f"rel err = {rel:.3e}  "
              f"{('ok' if rel < 0.01 else 'FAIL') if checked else 'not checked (see IG_INCOMPLETE)'}")
        ok &= rel < 0.01 or not checked
        meta.update({"ig_sum": ig_sum, "z_baseline": z_base})
    mg.write_json(os.path.join(folder, "grad_target.json"), meta)
    print(f"  target: {json.dumps(meta)}")
    return ok


def main():
    torch.set_num_threads(1)
    ok = all([make(name) for name in MODELS])
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
