#!/usr/bin/python3
"""Trains attnscope's default text model: a small GPT-2 on the King James Bible with its own
byte-level BPE, saved as a Hugging Face GPT2LMHeadModel checkpoint (model.safetensors,
config.json, generation_config.json, vocab.json, merges.txt, tokenizer.json, ...), then measured
by measure_text.py (phenomena.json, golden/*.npy).

The model is for teaching, so the training mix is designed to grow the classic heads fast:
  text      BOS + 255 KJV tokens from a random offset (every window starts with <|endoftext|>,
            the only token that is always there: a place for heads with nothing to do)
  copy      a text window in which a span of 8..48 tokens from earlier in the window is repeated
            later (in-context copying on natural text)
  repeat    BOS + random tokens R (8..100 long, drawn from the tokens of the text) repeated until
            the window is full, sometimes after a text prefix (induction heads, Olsson et al.
            2022). The first copy is unpredictable and stays in the loss: the best a head can do
            there is nothing, one more reason to learn a resting place
  skip      random tokens where, 70% of the time, token t+1 is a fixed function f of token t-1
            (a random permutation of the text's tokens). Only a head that reads the previous
            token can predict it, so a previous-token head pays off on its own, before any
            induction head exists (the first half of the induction circuit, which otherwise
            has to wait for the second: Olsson et al. 2022)
  backcopy  Bigram-Backcopy (Guo et al. 2024): a random bigram chain over byte tokens that never
            occur in the text; after one of 4 trigger tokens the next token repeats the token
            before the trigger. The head that copies must act on triggers and stay dormant
            elsewhere, which is what makes attention sinks form (Guo et al. 2024; Gu et al. 2024)
  induct    BOS, sometimes a text prefix, then spans R1 R1 R2 R2 ... (each 8..40 tokens followed at
            once by its copy) drawn from the --span-vocab most frequent text tokens, a curriculum
            that starts small: with few span tokens every earlier token is in the window, so a
            bag-of-earlier-tokens shortcut gains nothing and only an induction head lowers the loss
            (teaching-text: assets/models/teaching-text/README.md)

  nice -n 19 /usr/bin/python3 models/train/train_text.py                 # full run
  /usr/bin/python3 models/train/train_text.py --steps 30 --out /tmp/t    # smoke test
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gpt2  # noqa: E402
import kjv  # noqa: E402
import measure_text  # noqa: E402
import safetensors_io  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup-steps", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--embd", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--qk-init-std", type=float, default=0.08,
                   help="init std of the query/key columns of c_attn (HF uses 0.02 everywhere); "
                        "larger Q/K make attention non-uniform from the start, which shortens "
                        "the plateau before heads specialise")
    p.add_argument("--max-minutes", type=float, default=0,
                   help="stop training after this many wall-clock minutes (0 = no limit); the "
                        "steps actually taken are recorded")
    p.add_argument("--pos-init", choices=["normal", "sinusoidal"], default="sinusoidal",
                   help="initial position embeddings: HF's N(0, 0.02), or sinusoids (Vaswani et "
                        "al. 2017) of the same row norm, whose relative-position structure lets "
                        "previous-token heads form early (they are still learned)")
    p.add_argument("--mix", default="text=0.3,copy=0.1,skip=0.15,repeat=0.25,backcopy=0.2",
                   help="fractions of training windows of each kind")
    p.add_argument("--span-vocab", default="0@0",
                   help="curriculum of the induct windows' span vocabulary: size@step pairs, "
                        "e.g. 32@0,256@600,0@1200 draws span tokens from the 32 most frequent "
                        "text tokens from step 0, the 256 most frequent from step 600 and from "
                        "all text tokens (0) from step 1200")
    p.add_argument("--grow-layers", type=int, default=0,
                   help="with --init: append this many new blocks (output projections "
                        "initialised small, so the model starts as the checkpoint)")
    p.add_argument("--device", default="cpu", help="torch device to train on (cpu, cuda)")
    p.add_argument("--tokenizer-from", default=None,
                   help="without --init: take the tokenizer of this checkpoint folder instead "
                        "of training a BPE (fresh weights, same token ids)")
    p.add_argument("--model-name", default="default-text",
                   help="name recorded in phenomena.json")
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--init", default=None,
                   help="continue training this checkpoint folder (its tokenizer and shape; give "
                        "the same --seed so the skip/backcopy tables are the same)")
    p.add_argument("--data-seed", type=int, default=None,
                   help="seed of the stream of windows (default --seed; a continuation wants "
                        "its own)")
    p.add_argument("--out", default=os.path.join(REPO, "assets/models/default-text"))
    return p.parse_args()


class Mix:
    """Draws training windows (T+1 token ids, BOS first) of the kinds described above."""

    def __init__(self, train_ids, pool, unused, bos, context, fractions, rng):
        self.ids, self.pool, self.bos, self.rng = train_ids, np.asarray(pool), bos, rng
        self.t = context
        self.kinds = list(fractions)
        p = np.array([fractions[k] for k in self.kinds], dtype=np.float64)
        self.p = p / p.sum()
        # Bigram-Backcopy vocabulary: byte tokens absent from the text, so that the task does not
        # disturb the statistics of text tokens.
        unused = np.asarray(unused)
        self.triggers, self.plain = unused[:4], unused[4:]
        self.trigger_set = set(int(t) for t in self.triggers)
        n = len(self.plain)
        self.successors = rng.integers(0, n, size=(len(unused), 3))  # 3 likely successors each
        self.index = {int(t): i for i, t in enumerate(unused)}
        self.skip_map = dict(zip(self.pool.tolist(), rng.permutation(self.pool).tolist()))
        counts = np.bincount(np.asarray(train_ids), minlength=int(self.pool.max()) + 1)
        self.by_freq = self.pool[np.argsort(-counts[self.pool], kind="stable")]
        self.span_vocab = 0  # 0 = the whole pool; set by the curriculum

    def induct(self):
        """BOS, sometimes a text prefix, then spans R1 R1 R2 R2 ...: each span (8..40 tokens)
        followed by its copy. Span tokens come from the span_vocab most frequent text tokens,
        without replacement, so that with a small span vocabulary every earlier token is in
        the bag: only a head that finds the token after the earlier occurrence of the current
        token (an induction head) lowers the loss on the copy."""
        k = self.span_vocab if 0 < self.span_vocab < len(self.pool) else len(self.pool)
        vocab = self.by_freq[:k]
        seq = [self.bos]
        if self.rng.random() < 0.3:
            seq += self._text(int(self.rng.integers(1, 64))).tolist()
        while len(seq) < self.t + 1:
            length = int(self.rng.integers(8, min(40, k) + 1))
            if k <= 4 * 40:
                r = self.rng.choice(vocab, size=length, replace=False)
            else:
                r = vocab[self.rng.integers(0, k, size=length)]
            seq += r.tolist() + r.tolist()
        return np.array(seq[:self.t + 1])

    def _text(self, n):
        start = self.rng.integers(0, len(self.ids) - n)
        return self.ids[start:start + n]

    def text(self):
        return np.concatenate([[self.bos], self._text(self.t)])

    def copy(self):
        t = self._text(self.t)
        length = int(self.rng.integers(8, 49))
        src = int(self.rng.integers(0, self.t // 2 - length))
        dst = int(self.rng.integers(src + length, self.t - length))
        return np.concatenate([[self.bos], t[:dst], t[src:src + length], t[dst:]])[:self.t + 1]

    def repeat(self):
        use_prefix = self.rng.random() < 0.3
        prefix = self._text(int(self.rng.integers(1, 100))) if use_prefix else self.ids[:0]
        length = int(self.rng.integers(8, 101))
        r = self.pool[self.rng.integers(0, len(self.pool), size=length)]
        reps = math.ceil((self.t - len(prefix)) / length)
        return np.concatenate([[self.bos], prefix, np.tile(r, reps)])[:self.t + 1]

    def skip(self):
        seq = [self.bos] + self.pool[self.rng.integers(0, len(self.pool), size=2)].tolist()
        while len(seq) < self.t + 1:
            if self.rng.random() < 0.7:
                seq.append(self.skip_map[seq[-2]])
            else:
                seq.append(int(self.pool[self.rng.integers(0, len(self.pool))]))
        return np.array(seq)

    def backcopy(self):
        seq = [self.bos, int(self.plain[self.rng.integers(0, len(self.plain))])]
        while len(seq) < self.t + 1:
            prev = seq[-1]
            if prev in self.trigger_set:
                seq.append(seq[-2])  # the deterministic copy
            elif self.rng.random() < 0.12:
                seq.append(int(self.triggers[self.rng.integers(0, len(self.triggers))]))
            else:
                choice = self.successors[self.index[prev], self.rng.integers(0, 3)]
                seq.append(int(self.plain[choice]))
        return np.array(seq)

    def batch(self, n):
        kinds = self.rng.choice(len(self.kinds), size=n, p=self.p)
        seqs = torch.tensor(np.stack([getattr(self, self.kinds[k])() for k in kinds]))
        return seqs[:, :-1], seqs[:, 1:]


def init_attention(model, args):
    """The two initialisation choices described in --qk-init-std and --pos-init."""
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.c_attn.weight[:, :2 * args.embd].normal_(0.0, args.qk_init_std)
        if args.pos_init == "sinusoidal":
            pos = torch.arange(args.context, dtype=torch.float64)[:, None]
            freq = 10000.0 ** (-torch.arange(0, args.embd, 2, dtype=torch.float64) / args.embd)
            pe = torch.zeros(args.context, args.embd, dtype=torch.float64)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
            # Row norm sqrt(embd/2) scaled to that of an N(0, 0.02) row, 0.02 sqrt(embd).
            model.transformer.wpe.weight.copy_((pe * 0.02 * math.sqrt(2.0)).float())


def hf_config(cfg):
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": cfg["vocab_size"], "n_positions": cfg["n_positions"],
        "n_ctx": cfg["n_positions"], "n_embd": cfg["n_embd"], "n_layer": cfg["n_layer"],
        "n_head": cfg["n_head"], "n_inner": None, "activation_function": "gelu_new",
        "layer_norm_epsilon": cfg["layer_norm_epsilon"], "initializer_range": 0.02,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False, "tie_word_embeddings": True, "use_cache": True,
        "bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
        "torch_dtype": "float32",
    }


def save_checkpoint(model, tok, folder):
    os.makedirs(folder, exist_ok=True)
    state = {k: v.detach().cpu().numpy().astype("<f4") for k, v in model.hf_state_dict().items()}
    safetensors_io.save_file(state, os.path.join(folder, "model.safetensors"),
                             metadata={"format": "pt"})
    cfg = model.cfg
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config(cfg), f, indent=2)
        f.write("\n")
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]}, f,
                  indent=2)
        f.write("\n")
    tok.save(folder, cfg["n_positions"])


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    t_start = time.time()

    train_text, heldout_text = kjv.split_text()
    previous = None
    if args.init:
        tok = bpe.Tokenizer.load(args.init)
        with open(os.path.join(args.init, "config.json")) as f:
            hf = json.load(f)
        args.layers, args.heads, args.embd = hf["n_layer"], hf["n_head"], hf["n_embd"]
        args.context = hf["n_positions"]
        with open(os.path.join(args.init, "phenomena.json")) as f:
            previous = json.load(f).get("training")
    elif args.tokenizer_from:
        tok = bpe.Tokenizer.load(args.tokenizer_from)
    else:
        vocab, merges = bpe.train([train_text], args.vocab)
        tok = bpe.Tokenizer(vocab, merges)
    vocab = tok.vocab
    bos = tok.vocab[bpe.ENDOFTEXT]
    train_ids = np.array(tok.encode(train_text), dtype=np.int64)
    heldout_ids = np.array(tok.encode(heldout_text), dtype=np.int64)
    pool = measure_text.text_token_pool(train_ids, len(tok.vocab), bos)
    unused = [i for i in range(256) if i not in set(pool)]
    print(f"bpe {len(vocab)} tokens; train {len(train_ids)} tokens, held-out {len(heldout_ids)}; "
          f"{len(pool)} tokens used by the text, {len(unused)} byte tokens unused "
          f"({time.time() - t_start:.0f}s)", flush=True)

    fractions = {k: float(v) for k, v in (kv.split("=") for kv in args.mix.split(","))}
    mix = Mix(train_ids, pool, rng.permutation(unused), bos, args.context, fractions, rng)
    if args.data_seed is not None:
        mix.rng = np.random.default_rng(args.data_seed)
    cfg = gpt2.default_config(vocab_size=len(vocab), n_positions=args.context, n_embd=args.embd,
                              n_layer=args.layers, n_head=args.heads, bos_token_id=bos,
                              eos_token_id=bos)
    if args.init:
        model, _ = measure_text.load_checkpoint(args.init)
        if args.grow_layers:
            old = model
            cfg = dict(old.cfg, n_layer=old.cfg["n_layer"] + args.grow_layers)
            args.layers = cfg["n_layer"]
            model = gpt2.GPT2LMHeadModel(cfg)
            init_attention(model, args)
            with torch.no_grad():
                for block in model.transformer.h[old.cfg["n_layer"]:]:
                    block.attn.c_proj.weight.mul_(0.1)
                    block.mlp.c_proj.weight.mul_(0.1)
            state = model.state_dict()
            state.update({k: v for k, v in old.state_dict().items()})
            model.load_state_dict(state)
            print(f"grown to {cfg['n_layer']} layers", flush=True)
        model.train()
        print(f"starting from {args.init}", flush=True)
    else:
        model = gpt2.GPT2LMHeadModel(cfg)
        init_attention(model, args)
    model.to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters {n_params}", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr,
                            betas=(0.9, 0.95))

    def lr_at(step):
        if step < args.warmup_steps:
            return args.lr * (step + 1) / args.warmup_steps
        progress = (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps)
        if args.max_minutes:  # the cosine follows the clock when time is the limit
            progress = max(progress, (time.time() - t_train) / (60 * args.max_minutes))
        progress = min(1.0, progress)
        return args.lr * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 *
                          (1 + math.cos(math.pi * progress)))

    # size@step, or size@minutes with an m suffix (a time-limited run on unknown hardware)
    curriculum = [(int(a), b) for a, b in (kv.split("@") for kv in args.span_vocab.split(","))]
    history = []
    best_loss = float("inf")
    t_train, cpu0 = time.time(), time.process_time()
    loss_avg = None
    steps_done = 0
    for step in range(args.steps):
        if args.max_minutes and time.time() - t_train > 60 * args.max_minutes:
            print(f"time limit: stopping after {step} of {args.steps} steps", flush=True)
            break
        steps_done = step + 1
        minutes = (time.time() - t_train) / 60
        for size, at in curriculum:
            if (minutes if at.endswith("m") else step) >= float(at.rstrip("m")):
                mix.span_vocab = size
        x, y = mix.batch(args.batch)
        x, y = x.to(args.device), y.to(args.device)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_avg = loss.item() if loss_avg is None else 0.98 * loss_avg + 0.02 * loss.item()
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            q = measure_text.quick(model, heldout_ids, pool, bos)
            q.update(step=step + 1, train_loss=loss_avg, seconds=round(time.time() - t_train))
            history.append(q)
            print(f"step {step + 1} loss {loss_avg:.3f} heldout {q['heldout_loss']:.3f} "
                  f"sink {q['sink'][2]:.2f}@L{q['sink'][0]}H{q['sink'][1]} "
                  f"prev {q['prev'][2]:.2f}@L{q['prev'][0]}H{q['prev'][1]} "
                  f"ind {q['induction'][2]:.2f}@L{q['induction'][0]}H{q['induction'][1]} "
                  f"copy {q['copy_loss'][0]:.2f}->{q['copy_loss'][1]:.2f} "
                  f"span {mix.span_vocab} {q['seconds']}s", flush=True)
            save_checkpoint(model, tok, args.out)
            if (q["induction"][2] >= 0.3 and q["prev"][2] > 0.5 and q["sink"][2] > 0.5
                    and q["heldout_loss"] < best_loss):
                best_loss = q["heldout_loss"]  # the best checkpoint that shows all three heads
                save_checkpoint(model, tok, args.out + "-best")
                print(f"saved {args.out}-best", flush=True)
    wall, cpu = time.time() - t_train, time.process_time() - cpu0

    save_checkpoint(model, tok, args.out)
    result = measure_text.measure(args.out, heldout_ids, pool)
    result["model"] = args.model_name
    result["training"] = {
        "seed": args.seed, "steps": steps_done, "steps_scheduled": args.steps,
        "batch": args.batch, "context": args.context,
        "tokens_seen": steps_done * args.batch * args.context, "lr": args.lr,
        "min_lr_ratio": args.min_lr_ratio, "warmup_steps": args.warmup_steps,
        "weight_decay": args.weight_decay, "qk_init_std": args.qk_init_std, "pos_init": args.pos_init,
        "mix": fractions, "span_vocab": args.span_vocab, "grow_layers": args.grow_layers,
        "layers": args.layers, "max_minutes": args.max_minutes, "data_seed": args.data_seed,
        "threads": args.threads, "wall_seconds_training": round(wall),
        "cpu_seconds_training": round(cpu), "corpus_train_tokens": int(len(train_ids)),
        "corpus_heldout_tokens": int(len(heldout_ids)), "torch": torch.__version__,
        "backcopy_triggers": [int(t) for t in mix.triggers], "history": history,
        "continued_from": previous,
    }
    with open(os.path.join(args.out, "phenomena.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"final: heldout loss {result['heldout']['loss']:.3f}, "
          f"sink {result['sink']['best_layer_ge_1']}, prev {result['previous_token']['best']}, "
          f"induction {result['induction']['best_layer_ge_1']}, copy loss "
          f"{result['induction']['loss_first_copy']:.2f} -> "
          f"{result['induction']['loss_second_copy']:.2f}; training {wall:.0f}s", flush=True)


if __name__ == "__main__":
    main()
