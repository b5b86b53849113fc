"""GPT-2 causal LM with the exact math and parameter names of Hugging Face's GPT2LMHeadModel
(transformers/models/gpt2/modeling_gpt2.py), so that a state_dict saved from this module loads
there unchanged and gives the same logits.

Per block (pre-LN):  x = x + c_proj(Attn(ln_1(x)));  x = x + mlp.c_proj(gelu_new(mlp.c_fc(ln_2(x))))
Attention: causal softmax(Q K^T / sqrt(d_head)) V; c_attn packs [Q | K | V] along its output.
Conv1D weights are stored [in, out] (y = x W + b), the transpose of nn.Linear.
Logits: ln_f(x) @ wte^T (lm_head is tied to wte and not stored).
"""

import math

import torch
import torch.nn as nn


def default_config(**overrides):
    cfg = dict(vocab_size=4096, n_positions=256, n_embd=192, n_layer=4, n_head=4,
               layer_norm_epsilon=1e-5, bos_token_id=4095, eos_token_id=4095)
    cfg.update(overrides)
    return cfg


def gelu_new(x):
    """GPT-2's tanh approximation of GELU."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class Conv1D(nn.Module):
    def __init__(self, n_out, n_in):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))  # [in, out]
        self.bias = nn.Parameter(torch.zeros(n_out))  # [out]
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(
            *x.shape[:-1], -1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.n_head = cfg["n_head"]
        self.c_attn = Conv1D(3 * d, d)
        self.c_proj = Conv1D(d, d)

    def forward(self, x):  # [B, T, D] -> (out [B, T, D], probs [B, H, T, T])
        b, t, d = x.shape
        dh = d // self.n_head
        q, k, v = self.c_attn(x).split(d, dim=2)
        heads = lambda y: y.view(b, t, self.n_head, dh).permute(0, 2, 1, 3)  # [B, H, T, dh]
        q, k, v = heads(q), heads(k), heads(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        out = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, d)
        return self.c_proj(out), probs


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.c_fc = Conv1D(4 * d, d)
        self.c_proj = Conv1D(d, 4 * d)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, eps = cfg["n_embd"], cfg["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = MLP(cfg)

    def forward(self, x):
        a, probs = self.attn(self.ln_1(x))
        x = x + a
        return x + self.mlp(self.ln_2(x)), probs


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.wte = nn.Embedding(cfg["vocab_size"], d)  # [V, D]
        self.wpe = nn.Embedding(cfg["n_positions"], d)  # [n_positions, D]
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(d, eps=cfg["layer_norm_epsilon"])


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = Transformer(cfg)
        self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as in HF
        self._init_weights()

    def _init_weights(self):
        # HF GPT-2: N(0, 0.02) for embeddings and Conv1D, residual projections scaled by
        # 1/sqrt(2 n_layer), LayerNorm weight 1 / bias 0.
        nn.init.normal_(self.transformer.wte.weight, std=0.02)
        nn.init.normal_(self.transformer.wpe.weight, std=0.02)
        for block in self.transformer.h:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * self.cfg["n_layer"]))

    def forward(self, ids, return_attentions=False):
        """ids: int64 [B, T]. Returns logits [B, T, V] (and per-layer probs [B, H, T, T])."""
        t = ids.shape[1]
        if t > self.cfg["n_positions"]:
            raise ValueError(f"sequence of {t} tokens exceeds n_positions")
        pos = torch.arange(t, device=ids.device)
        x = self.transformer.wte(ids) + self.transformer.wpe(pos)[None]
        attentions = []
        for block in self.transformer.h:
            x, probs = block(x)
            attentions.append(probs)
        logits = self.lm_head(self.transformer.ln_f(x))
        return (logits, attentions) if return_attentions else logits

    def hf_state_dict(self):
        """Tensors named as HF saves them: lm_head.weight omitted because it is tied to wte."""
        return {k: v for k, v in self.state_dict().items() if k != "lm_head.weight"}
