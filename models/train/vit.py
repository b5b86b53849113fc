"""ViT for image classification with the exact math and parameter names of Hugging Face's
ViTForImageClassification (transformers/models/vit/modeling_vit.py), so that a state_dict saved
from this module loads there unchanged and gives the same logits.

Math per layer (pre-LN):  x = x + O(Attn(LN_before(x)));  x = x + Out(GELU(Inter(LN_after(x))))
Attention: softmax(Q K^T / sqrt(d_head)) V per head; GELU is the exact erf form ("gelu").
Final: LN(x), classifier on the CLS token (position 0). No pooler.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def default_config(**overrides):
    cfg = dict(image_size=28, patch_size=4, num_channels=1, hidden_size=64, num_hidden_layers=4,
               num_attention_heads=4, intermediate_size=128, layer_norm_eps=1e-12, qkv_bias=True,
               num_labels=10)
    cfg.update(overrides)
    return cfg


class PatchEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        p = cfg["patch_size"]
        self.projection = nn.Conv2d(cfg["num_channels"], cfg["hidden_size"], kernel_size=p,
                                    stride=p)  # weight [D, C, p, p], bias [D]

    def forward(self, pixels):  # [B, C, H, W] -> [B, P, D], patches in row-major order
        return self.projection(pixels).flatten(2).transpose(1, 2)


class Embeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["hidden_size"]
        n_patches = (cfg["image_size"] // cfg["patch_size"]) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))  # [1, 1, D]
        self.position_embeddings = nn.Parameter(torch.zeros(1, 1 + n_patches, d))  # [1, 1+P, D]
        self.patch_embeddings = PatchEmbeddings(cfg)

    def forward(self, pixels):
        x = self.patch_embeddings(pixels)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return torch.cat([cls, x], dim=1) + self.position_embeddings


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, bias = cfg["hidden_size"], cfg["qkv_bias"]
        self.n_heads = cfg["num_attention_heads"]
        self.query = nn.Linear(d, d, bias=bias)
        self.key = nn.Linear(d, d, bias=bias)
        self.value = nn.Linear(d, d, bias=bias)

    def forward(self, x):  # [B, T, D] -> (context [B, T, D], probs [B, H, T, T])
        b, t, d = x.shape
        dh = d // self.n_heads
        split = lambda y: y.view(b, t, self.n_heads, dh).transpose(1, 2)  # [B, H, T, dh]
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(b, t, d)
        return ctx, probs


class SelfOutput(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["hidden_size"])


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.output = SelfOutput(cfg)

    def forward(self, x):
        ctx, probs = self.attention(x)
        return self.output.dense(ctx), probs


class Intermediate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["intermediate_size"])


class Output(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["intermediate_size"], cfg["hidden_size"])


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = Output(cfg)
        self.layernorm_before = nn.LayerNorm(d, eps=eps)
        self.layernorm_after = nn.LayerNorm(d, eps=eps)

    def forward(self, x):
        a, probs = self.attention(self.layernorm_before(x))
        x = x + a
        h = F.gelu(self.intermediate.dense(self.layernorm_after(x)))
        return x + self.output.dense(h), probs


class Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg) for _ in range(cfg["num_hidden_layers"]))


class ViTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings = Embeddings(cfg)
        self.encoder = Encoder(cfg)
        self.layernorm = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])


class ViTForImageClassification(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.vit = ViTModel(cfg)
        self.classifier = nn.Linear(cfg["hidden_size"], cfg["num_labels"])
        self._init_weights()

    def _init_weights(self):
        # HF ViT: truncated normal (std 0.02) for linear/conv weights and both embeddings,
        # zero biases, LayerNorm weight 1 / bias 0.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.trunc_normal_(self.vit.embeddings.cls_token, std=0.02)
        nn.init.trunc_normal_(self.vit.embeddings.position_embeddings, std=0.02)

    def forward(self, pixels, return_attentions=False):
        """pixels: normalised f32 [B, C, H, W]. Returns logits [B, num_labels]
        (and the per-layer attention probabilities [B, H, T, T] when asked)."""
        x = self.vit.embeddings(pixels)
        attentions = []
        for layer in self.vit.encoder.layer:
            x, probs = layer(x)
            attentions.append(probs)
        logits = self.classifier(self.vit.layernorm(x)[:, 0])
        return (logits, attentions) if return_attentions else logits
