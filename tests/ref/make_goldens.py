#!/usr/bin/python3
"""Golden outputs for the C++ forward passes (tests/models/test_arch_golden.cpp).

Builds tiny random checkpoints in the exact Hugging Face tensor names and layouts of each
supported architecture, runs an independent PyTorch implementation of that architecture (written
here from the published model definitions, in float64), and writes, per model folder under
tests/ref/goldens/:

  config.json, model.safetensors (F32), tokenizer/preprocessor files where the model has them,
  golden_*.npy: inputs, logits, last hidden state, attention patterns of the first and last
  layer (and queries/keys after RoPE for Llama), saved as little-endian f32/i32 .npy v1.0.

Run with Debian's PyTorch:  /usr/bin/python3 tests/ref/make_goldens.py
It is deterministic (fixed seeds) and needs no network. Not run by CI: its outputs are committed.
Format version 1 (bump GOLDEN_VERSION when the file set or meaning changes).
"""

import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

GOLDEN_VERSION = 1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")
DT = torch.float64


# ----------------------------------------------------------------------------- file writers

def save_safetensors(path, tensors):
    """tensors: dict name -> float32 numpy array; written in sorted name order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def save_npy(folder, name, array, dtype="<f4"):
    np.save(os.path.join(folder, name + ".npy"), np.ascontiguousarray(np.asarray(array), dtype=dtype))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


class Params:
    """Random parameters, created in a fixed order from one generator, kept as float64."""

    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)
        self.t = {}

    def randn(self, name, shape, std):
        self.t[name] = torch.randn(*shape, generator=self.g, dtype=DT) * std
        return self.t[name]

    def norm(self, name, n):  # LayerNorm / RMSNorm gains near 1
        self.t[name] = 1.0 + 0.1 * torch.randn(n, generator=self.g, dtype=DT)
        return self.t[name]

    def __getitem__(self, k):
        return self.t[k]

    def save(self, folder, skip=()):
        save_safetensors(os.path.join(folder, "model.safetensors"),
                         {k: v.to(torch.float32).numpy() for k, v in self.t.items() if k not in skip})


# ----------------------------------------------------------------------------- shared math

def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * g + b


def rms_norm(x, g, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def attend(q, k, v, causal):
    """q [H, N, d], k/v [H, N, d] -> (out [N, H*d], probs [H, N, N])."""
    h, n, d = q.shape
    s = q @ k.transpose(1, 2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, dim=-1)
    return (p @ v).transpose(0, 1).reshape(n, h * d), p


def heads(x, h):  # [N, h*d] -> [h, N, d]
    n = x.shape[0]
    return x.reshape(n, h, -1).transpose(0, 1)


# ----------------------------------------------------------------------------- tokenizers

def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def write_gpt2_tokenizer(folder, corpus, n_merges):
    """Byte-level BPE with merges learned greedily from `corpus` (words split on spaces,
    GPT-2 style leading-space marker)."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: i for i, b in enumerate(sorted(b2u))}
    words = {}
    for i, w in enumerate(corpus.split(" ")):
        piece = (" " if i else "") + w
        sym = tuple(b2u[b] for b in piece.encode())
        words[sym] = words.get(sym, 0) + 1
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for sym, c in words.items():
            for a, b in zip(sym, sym[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        vocab[best[0] + best[1]] = len(vocab)
        new = {}
        for sym, c in words.items():
            out, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and (sym[i], sym[i + 1]) == best:
                    out.append(sym[i] + sym[i + 1])
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        words = new
    vocab["<|endoftext|>"] = len(vocab)
    write_json(os.path.join(folder, "vocab.json"), vocab)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    return len(vocab)


BERT_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "the", "a", "cat", "dog",
              "sat", "on", "mat", "and", "ran", "to", "house", "in", "it", "was", "big", "small",
              "##s", "##ed", "##ing", "play", "walk", "red", "blue", "is", "of"]


# ----------------------------------------------------------------------------- GPT-2

def make_gpt2(folder):
    corpus = ("the cat sat on the mat and the dog sat on the log while the cat ran to the "
              "house and the dog ran to the mat")
    V = write_gpt2_tokenizer(folder, corpus, 40)
    C, H, L, P = 16, 2, 2, 32
    I = 4 * C
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
           "n_embd": C, "n_head": H, "n_layer": L, "n_positions": P, "n_ctx": P,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "bos_token_id": V - 1, "eos_token_id": V - 1, "tie_word_embeddings": True}
    write_json(os.path.join(folder, "config.json"), cfg)
    w = Params(1)
    w.randn("transformer.wte.weight", (V, C), 0.3)
    w.randn("transformer.wpe.weight", (P, C), 0.1)
    for l in range(L):
        b = f"transformer.h.{l}."
        w.norm(b + "ln_1.weight", C); w.randn(b + "ln_1.bias", (C,), 0.1)
        w.randn(b + "attn.c_attn.weight", (C, 3 * C), 0.3); w.randn(b + "attn.c_attn.bias", (3 * C,), 0.1)
        w.randn(b + "attn.c_proj.weight", (C, C), 0.2); w.randn(b + "attn.c_proj.bias", (C,), 0.05)
        w.norm(b + "ln_2.weight", C); w.randn(b + "ln_2.bias", (C,), 0.1)
        w.randn(b + "mlp.c_fc.weight", (C, I), 0.2); w.randn(b + "mlp.c_fc.bias", (I,), 0.1)
        w.randn(b + "mlp.c_proj.weight", (I, C), 0.1); w.randn(b + "mlp.c_proj.bias", (C,), 0.05)
    w.norm("transformer.ln_f.weight", C); w.randn("transformer.ln_f.bias", (C,), 0.1)
    w.save(folder)

    ids = torch.tensor([5, 77, 200, 3, 3, 150, 280, V - 1, 42, 99, 7])
    N = len(ids)
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:N]
    pats = []
    for l in range(L):
        b = f"transformer.h.{l}."
        h = layer_norm(x, w[b + "ln_1.weight"], w[b + "ln_1.bias"], 1e-5)
        qkv = h @ w[b + "attn.c_attn.weight"] + w[b + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=1)
        a, p = attend(heads(q, H), heads(k, H), heads(v, H), True)
        pats.append(p)
        x = x + a @ w[b + "attn.c_proj.weight"] + w[b + "attn.c_proj.bias"]
        h = layer_norm(x, w[b + "ln_2.weight"], w[b + "ln_2.bias"], 1e-5)
        m = gelu_tanh(h @ w[b + "mlp.c_fc.weight"] + w[b + "mlp.c_fc.bias"])
        x = x + m @ w[b + "mlp.c_proj.weight"] + w[b + "mlp.c_proj.bias"]
    hs = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    logits = hs @ w["transformer.wte.weight"].T
    save_npy(folder, "golden_ids", ids.numpy(), "<i4")
    save_npy(folder, "golden_logits", logits.numpy())
    save_npy(folder, "golden_hidden", hs.numpy())
    save_npy(folder, "golden_pattern_0", pats[0].numpy())
    save_npy(folder, f"golden_pattern_{L - 1}", pats[-1].numpy())


# ----------------------------------------------------------------------------- Llama family

def rope_inv_freq(d, theta, scaling):
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=DT) / d))
    if scaling and scaling["rope_type"] == "llama3":
        factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        out = []
        for f in inv.tolist():
            wl = 2 * math.pi / f
            if wl < old / hi:
                out.append(f)
            elif wl > old / lo:
                out.append(f / factor)
            else:
                s = (old / wl - lo) / (hi - lo)
                out.append((1 - s) * f / factor + s * f)
        inv = torch.tensor(out, dtype=DT)
    return inv


def apply_rope(x, inv):  # x [h, N, d]; pairs (i, i + d/2)
    n, half = x.shape[1], x.shape[2] // 2
    ang = torch.arange(n, dtype=DT)[:, None] * inv[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * c - b * s, b * c + a * s], dim=-1)


def make_llama(folder, qwen):
    C, H, KV, D, L, I, V = 16, 4, 2, 8, 2, 32, 64
    theta = 10000.0
    scaling = None if qwen else {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 8.0, "original_max_position_embeddings": 64}
    cfg = {"model_type": "qwen2" if qwen else "llama",
           "architectures": ["Qwen2ForCausalLM" if qwen else "LlamaForCausalLM"],
           "vocab_size": V, "hidden_size": C, "num_attention_heads": H, "num_key_value_heads": KV,
           "head_dim": D, "num_hidden_layers": L, "intermediate_size": I,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": theta,
           "hidden_act": "silu", "tie_word_embeddings": qwen, "bos_token_id": 1, "eos_token_id": 2}
    if scaling:
        cfg["rope_scaling"] = scaling
    if qwen:
        cfg["use_sliding_window"] = False
    write_json(os.path.join(folder, "config.json"), cfg)
    w = Params(3 if qwen else 2)
    w.randn("model.embed_tokens.weight", (V, C), 0.5)
    for l in range(L):
        b = f"model.layers.{l}."
        w.norm(b + "input_layernorm.weight", C)
        w.randn(b + "self_attn.q_proj.weight", (H * D, C), 0.3)
        w.randn(b + "self_attn.k_proj.weight", (KV * D, C), 0.3)
        w.randn(b + "self_attn.v_proj.weight", (KV * D, C), 0.3)
        if qwen:
            w.randn(b + "self_attn.q_proj.bias", (H * D,), 0.2)
            w.randn(b + "self_attn.k_proj.bias", (KV * D,), 0.2)
            w.randn(b + "self_attn.v_proj.bias", (KV * D,), 0.2)
        w.randn(b + "self_attn.o_proj.weight", (C, H * D), 0.2)
        w.norm(b + "post_attention_layernorm.weight", C)
        w.randn(b + "mlp.gate_proj.weight", (I, C), 0.3)
        w.randn(b + "mlp.up_proj.weight", (I, C), 0.3)
        w.randn(b + "mlp.down_proj.weight", (C, I), 0.2)
    w.norm("model.norm.weight", C)
    if not qwen:
        w.randn("lm_head.weight", (V, C), 0.3)
    w.save(folder)

    ids = torch.tensor([1, 17, 4, 60, 33, 33, 8, 2, 45, 12, 63, 29, 5])
    N = len(ids)
    inv = rope_inv_freq(D, theta, scaling)
    linear = lambda x, n, bias: x @ w[n + ".weight"].T + (w[n + ".bias"] if bias else 0)
    x = w["model.embed_tokens.weight"][ids]
    pats = []
    for l in range(L):
        b = f"model.layers.{l}."
        h = rms_norm(x, w[b + "input_layernorm.weight"], 1e-6)
        q = apply_rope(heads(linear(h, b + "self_attn.q_proj", qwen), H), inv)
        k = apply_rope(heads(linear(h, b + "self_attn.k_proj", qwen), KV), inv)
        v = heads(linear(h, b + "self_attn.v_proj", qwen), KV)
        if l == 0:
            save_npy(folder, "golden_q_0", q.numpy())
            save_npy(folder, "golden_k_0", k.numpy())
        rep = H // KV
        a, p = attend(q, k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0), True)
        pats.append(p)
        x = x + a @ w[b + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[b + "post_attention_layernorm.weight"], 1e-6)
        g = h @ w[b + "mlp.gate_proj.weight"].T
        u = h @ w[b + "mlp.up_proj.weight"].T
        x = x + (g * torch.sigmoid(g) * u) @ w[b + "mlp.down_proj.weight"].T
    hs = rms_norm(x, w["model.norm.weight"], 1e-6)
    head = w["model.embed_tokens.weight"] if qwen else w["lm_head.weight"]
    logits = hs @ head.T
    save_npy(folder, "golden_ids", ids.numpy(), "<i4")
    save_npy(folder, "golden_logits", logits.numpy())
    save_npy(folder, "golden_hidden", hs.numpy())
    save_npy(folder, "golden_pattern_0", pats[0].numpy())
    save_npy(folder, f"golden_pattern_{L - 1}", pats[-1].numpy())


# ----------------------------------------------------------------------------- BERT

def make_bert(folder):
    V, C, H, L, I, P, T = len(BERT_WORDS), 16, 2, 2, 32, 32, 2
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(BERT_WORDS) + "\n")
    write_json(os.path.join(folder, "tokenizer_config.json"), {"do_lower_case": True})
    cfg = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": V,
           "hidden_size": C, "num_attention_heads": H, "num_hidden_layers": L,
           "intermediate_size": I, "max_position_embeddings": P, "type_vocab_size": T,
           "hidden_act": "gelu", "layer_norm_eps": 1e-12, "pad_token_id": 0}
    write_json(os.path.join(folder, "config.json"), cfg)
    w = Params(4)
    e = "bert.embeddings."
    w.randn(e + "word_embeddings.weight", (V, C), 0.5)
    w.randn(e + "position_embeddings.weight", (P, C), 0.2)
    w.randn(e + "token_type_embeddings.weight", (T, C), 0.2)
    w.norm(e + "LayerNorm.weight", C); w.randn(e + "LayerNorm.bias", (C,), 0.1)
    for l in range(L):
        b = f"bert.encoder.layer.{l}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            w.randn(b + n + ".weight", (C, C), 0.3); w.randn(b + n + ".bias", (C,), 0.1)
        w.norm(b + "attention.output.LayerNorm.weight", C)
        w.randn(b + "attention.output.LayerNorm.bias", (C,), 0.1)
        w.randn(b + "intermediate.dense.weight", (I, C), 0.3); w.randn(b + "intermediate.dense.bias", (I,), 0.1)
        w.randn(b + "output.dense.weight", (C, I), 0.2); w.randn(b + "output.dense.bias", (C,), 0.1)
        w.norm(b + "output.LayerNorm.weight", C); w.randn(b + "output.LayerNorm.bias", (C,), 0.1)
    w.randn("cls.predictions.transform.dense.weight", (C, C), 0.3)
    w.randn("cls.predictions.transform.dense.bias", (C,), 0.1)
    w.norm("cls.predictions.transform.LayerNorm.weight", C)
    w.randn("cls.predictions.transform.LayerNorm.bias", (C,), 0.1)
    w.randn("cls.predictions.bias", (V,), 0.1)
    w.save(folder)

    ids = torch.tensor([2, 7, 9, 11, 4, 7, 13, 5, 3])
    types = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1])
    N = len(ids)
    lin = lambda x, n: x @ w[n + ".weight"].T + w[n + ".bias"]
    eps = 1e-12
    x = w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][:N] + \
        w[e + "token_type_embeddings.weight"][types]
    x = layer_norm(x, w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], eps)
    pats = []
    for l in range(L):
        b = f"bert.encoder.layer.{l}."
        q, k, v = (heads(lin(x, b + "attention.self." + n), H) for n in ("query", "key", "value"))
        a, p = attend(q, k, v, False)
        pats.append(p)
        x = layer_norm(x + lin(a, b + "attention.output.dense"),
                       w[b + "attention.output.LayerNorm.weight"], w[b + "attention.output.LayerNorm.bias"], eps)
        m = gelu_erf(lin(x, b + "intermediate.dense"))
        x = layer_norm(x + lin(m, b + "output.dense"), w[b + "output.LayerNorm.weight"],
                       w[b + "output.LayerNorm.bias"], eps)
    t = gelu_erf(lin(x, "cls.predictions.transform.dense"))
    t = layer_norm(t, w["cls.predictions.transform.LayerNorm.weight"],
                   w["cls.predictions.transform.LayerNorm.bias"], eps)
    logits = t @ w[e + "word_embeddings.weight"].T + w["cls.predictions.bias"]
    save_npy(folder, "golden_ids", ids.numpy(), "<i4")
    save_npy(folder, "golden_token_types", types.numpy(), "<i4")
    save_npy(folder, "golden_logits", logits.numpy())
    save_npy(folder, "golden_hidden", x.numpy())
    save_npy(folder, "golden_pattern_0", pats[0].numpy())
    save_npy(folder, f"golden_pattern_{L - 1}", pats[-1].numpy())


# ----------------------------------------------------------------------------- ViT / DeiT

def bicubic_grid(grid, h, w):
    """grid [g, g, C] -> [h, w, C] with F.interpolate(bicubic, align_corners=False)."""
    t = grid.permute(2, 0, 1)[None]
    return F.interpolate(t, size=(h, w), mode="bicubic", align_corners=False)[0].permute(1, 2, 0)


def vit_forward(w, pre, pixels, cfg, distill):
    C, H, p = cfg["hidden_size"], cfg["num_attention_heads"], cfg["patch_size"]
    L, eps = cfg["num_hidden_layers"], cfg["layer_norm_eps"]
    e = pre + "embeddings."
    conv = F.conv2d(pixels[None], w[e + "patch_embeddings.projection.weight"],
                    w[e + "patch_embeddings.projection.bias"], stride=p)[0]  # [C, gh, gw]
    gh, gw = conv.shape[1:]
    x = conv.flatten(1).T
    special = [w[e + "cls_token"][0, 0]] + ([w[e + "distillation_token"][0, 0]] if distill else [])
    S = len(special)
    pos = w[e + "position_embeddings"][0]
    g = int(round(math.sqrt(pos.shape[0] - S)))
    grid = pos[S:].reshape(g, g, C)
    if (gh, gw) != (g, g):
        grid = bicubic_grid(grid, gh, gw)
    x = torch.cat([torch.stack(special), x]) + torch.cat([pos[:S], grid.reshape(-1, C)])
    lin = lambda x, n: x @ w[n + ".weight"].T + w[n + ".bias"]
    pats = []
    for l in range(L):
        b = f"{pre}encoder.layer.{l}."
        h = layer_norm(x, w[b + "layernorm_before.weight"], w[b + "layernorm_before.bias"], eps)
        q, k, v = (heads(lin(h, b + "attention.attention." + n), H) for n in ("query", "key", "value"))
        a, pr = attend(q, k, v, False)
        pats.append(pr)
        x = x + lin(a, b + "attention.output.dense")
        h = layer_norm(x, w[b + "layernorm_after.weight"], w[b + "layernorm_after.bias"], eps)
        x = x + lin(gelu_erf(lin(h, b + "intermediate.dense")), b + "output.dense")
    hs = layer_norm(x, w[pre + "layernorm.weight"], w[pre + "layernorm.bias"], eps)
    if distill:  # DeiTForImageClassificationWithTeacher: mean of both heads
        logits = (lin(hs[0], "cls_classifier") + lin(hs[1], "distillation_classifier")) / 2
    else:
        logits = lin(hs[0], "classifier")
    return logits, hs, pats


def pil_preprocess(png_path, size, resample, mean, std):
    from PIL import Image
    img = Image.open(png_path).convert("RGB").resize((size, size), resample=resample)
    a = np.asarray(img).astype(np.float64) / 255.0
    a = (a - np.array(mean)) / np.array(std)
    return torch.tensor(a.transpose(2, 0, 1), dtype=DT)


def make_vit(folder, deit):
    from PIL import Image
    C, H, L, I, S, p, ch, K = 16, 2, (1 if deit else 2), 32, 16, 4, 3, 5
    labels = {str(i): n for i, n in enumerate(["shirt", "shoe", "bag", "coat", "dress"])}
    cfg = {"model_type": "deit" if deit else "vit",
           "architectures": ["DeiTForImageClassificationWithTeacher" if deit else "ViTForImageClassification"],
           "hidden_size": C, "num_attention_heads": H, "num_hidden_layers": L, "intermediate_size": I,
           "image_size": S, "patch_size": p, "num_channels": ch, "hidden_act": "gelu",
           "layer_norm_eps": 1e-12, "qkv_bias": True, "id2label": labels,
           "label2id": {v: int(k) for k, v in labels.items()}}
    write_json(os.path.join(folder, "config.json"), cfg)
    mean, std = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]
    resample = 3 if deit else 2
    write_json(os.path.join(folder, "preprocessor_config.json"),
               {"image_processor_type": "ViTImageProcessor", "do_resize": True,
                "size": {"height": S, "width": S}, "resample": resample, "do_rescale": True,
                "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": mean, "image_std": std})
    pre = "deit." if deit else "vit."
    w = Params(6 if deit else 5)
    e = pre + "embeddings."
    w.randn(e + "cls_token", (1, 1, C), 0.5)
    if deit:
        w.randn(e + "distillation_token", (1, 1, C), 0.5)
    w.randn(e + "position_embeddings", (1, (2 if deit else 1) + (S // p) ** 2, C), 0.3)
    w.randn(e + "patch_embeddings.projection.weight", (C, ch, p, p), 0.2)
    w.randn(e + "patch_embeddings.projection.bias", (C,), 0.1)
    for l in range(L):
        b = f"{pre}encoder.layer.{l}."
        w.norm(b + "layernorm_before.weight", C); w.randn(b + "layernorm_before.bias", (C,), 0.1)
        for n in ("attention.attention.query", "attention.attention.key", "attention.attention.value",
                  "attention.output.dense"):
            w.randn(b + n + ".weight", (C, C), 0.3); w.randn(b + n + ".bias", (C,), 0.1)
        w.norm(b + "layernorm_after.weight", C); w.randn(b + "layernorm_after.bias", (C,), 0.1)
        w.randn(b + "intermediate.dense.weight", (I, C), 0.3); w.randn(b + "intermediate.dense.bias", (I,), 0.1)
        w.randn(b + "output.dense.weight", (C, I), 0.2); w.randn(b + "output.dense.bias", (C,), 0.1)
    w.norm(pre + "layernorm.weight", C); w.randn(pre + "layernorm.bias", (C,), 0.1)
    head = "cls_classifier" if deit else "classifier"
    w.randn(head + ".weight", (K, C), 0.3); w.randn(head + ".bias", (K,), 0.1)
    if deit:
        w.randn("distillation_classifier.weight", (K, C), 0.3)
        w.randn("distillation_classifier.bias", (K,), 0.1)
    w.save(folder)

    # A smooth colour image of an odd size, so resizing really resamples.
    rng = np.random.default_rng(7 if deit else 8)
    yy, xx = np.mgrid[0:23, 0:37]
    img = np.stack([128 + 100 * np.sin(xx / 5.0 + c) * np.cos(yy / 4.0 - c) for c in range(3)], -1)
    img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
    png = os.path.join(folder, "image.png")
    Image.fromarray(img).save(png)
    pixels = pil_preprocess(png, S, resample, mean, std)
    logits, hs, pats = vit_forward(w, pre, pixels, cfg, deit)
    save_npy(folder, "golden_pixels", pixels.numpy())
    save_npy(folder, "golden_logits", logits.numpy())
    save_npy(folder, "golden_hidden", hs.numpy())
    save_npy(folder, "golden_pattern_0", pats[0].numpy())
    save_npy(folder, f"golden_pattern_{L - 1}", pats[-1].numpy())
    if not deit:
        # Another size: 24x24 pixels -> a 6x6 grid, position embeddings resampled bicubically.
        big = torch.tensor(np.random.default_rng(9).normal(0, 1, (ch, 24, 24)), dtype=DT)
        lg, hs2, _ = vit_forward(w, pre, big, cfg, False)
        save_npy(folder, "golden_pixels_24", big.numpy())
        save_npy(folder, "golden_logits_24", lg.numpy())
        save_npy(folder, "golden_hidden_24", hs2.numpy())


def make_resize(folder):
    """Pillow's Image.resize on 8-bit images, up and down, bilinear and bicubic, RGB and L."""
    from PIL import Image
    src = Image.open(os.path.join(OUT, "vit", "image.png")).convert("RGB")
    for mode in ("RGB", "L"):
        img = src.convert(mode)
        for name, code in (("bilinear", 2), ("bicubic", 3)):
            for w, h in ((53, 31), (9, 40)):
                out = np.asarray(img.resize((w, h), resample=code))
                np.save(os.path.join(folder, f"{mode}_{name}_{w}x{h}.npy"), out.astype(np.uint8))


def main():
    torch.set_num_threads(1)
    makers = {"gpt2": make_gpt2, "llama": lambda f: make_llama(f, False),
              "qwen2": lambda f: make_llama(f, True), "bert": make_bert,
              "vit": lambda f: make_vit(f, False), "deit": lambda f: make_vit(f, True),
              "resize": make_resize}
    for name, make in makers.items():
        folder = os.path.join(OUT, name)
        os.makedirs(folder, exist_ok=True)
        make(folder)
    write_json(os.path.join(OUT, "VERSION.json"),
               {"golden_version": GOLDEN_VERSION, "generator": "tests/ref/make_goldens.py",
                "torch": torch.__version__, "precision": "float64 reference, saved as f32"})
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {OUT} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    sys.exit(main())
