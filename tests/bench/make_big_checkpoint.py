#!/usr/bin/env python3
"""Writes an 8B-Llama-shaped checkpoint of random BF16 weights (Llama-3-8B's shapes: 32 layers,
32 heads / 8 KV heads of 128, width 4096, MLP 14336, vocab 128256, untied head; ~15 GiB) as
HF writes it: config.json, model-0000i-of-0000n.safetensors shards and their index. The weights
are N(0, 0.02) (norms 1), so activations stay finite through 32 layers; nothing here is
trained. Tensors are streamed to disk in slices, so writing needs ~1 GiB of memory.

Usage: /usr/bin/python3 tests/bench/make_big_checkpoint.py OUT_DIR [--layers 32] [--force]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "torch_dtype": "bfloat16",
}
SHARD_BYTES = 5 * 1024**3  # HF's default max_shard_size


def tensors(cfg):
    """(name, shape) in the order HF saves them."""
    C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, Hkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    yield "model.embed_tokens.weight", (V, C)
    for l in range(cfg["num_hidden_layers"]):
        b = f"model.layers.{l}."
        yield b + "input_layernorm.weight", (C,)
        yield b + "self_attn.q_proj.weight", (H * d, C)
        yield b + "self_attn.k_proj.weight", (Hkv * d, C)
        yield b + "self_attn.v_proj.weight", (Hkv * d, C)
        yield b + "self_attn.o_proj.weight", (C, H * d)
        yield b + "post_attention_layernorm.weight", (C,)
        yield b + "mlp.gate_proj.weight", (I, C)
        yield b + "mlp.up_proj.weight", (I, C)
        yield b + "mlp.down_proj.weight", (C, I)
    yield "model.norm.weight", (C,)
    yield "lm_head.weight", (V, C)


def bf16_bits(x):
    """float32 array -> uint16 bf16 bits, round to nearest even."""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_shard(path, items, rng):
    header, offset = {}, 0
    for name, shape in items:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, shape in items:
            n = int(np.prod(shape))
            if len(shape) == 1:
                f.write(bf16_bits(np.ones(n, dtype=np.float32)).tobytes())
                continue
            step = 1 << 26
            for a in range(0, n, step):
                x = rng.standard_normal(min(step, n - a), dtype=np.float32)
                x *= 0.02
                f.write(bf16_bits(x).tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    cfg = dict(CONFIG, num_hidden_layers=args.layers)
    os.makedirs(args.out, exist_ok=True)
    cfg_path = os.path.join(args.out, "config.json")
    index_path = os.path.join(args.out, "model.safetensors.index.json")
    if not args.force and os.path.exists(index_path) and os.path.exists(cfg_path):
        with open(cfg_path) as f:
            if json.load(f) == cfg:
                print(f"{args.out}: already written")
                return 0
    shards, cur, size = [], [], 0
    for name, shape in tensors(cfg):
        n = int(np.prod(shape)) * 2
        if cur and size + n > SHARD_BYTES:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += n
    shards.append(cur)
    rng = np.random.default_rng(8)
    weight_map, total = {}, 0
    for i, items in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_shard(os.path.join(args.out, fname), items, rng)
        for name, shape in items:
            weight_map[name] = fname
            total += int(np.prod(shape)) * 2
        print(f"  {fname}: {len(items)} tensors", flush=True)
    with open(index_path, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    print(f"{args.out}: {total / 2**30:.2f} GiB of BF16 weights in {len(shards)} shards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
