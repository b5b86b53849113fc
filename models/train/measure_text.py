#!/usr/bin/python3
"""Measures the classic attention phenomena of a saved GPT-2 checkpoint (the default text model):

  sink       per head: mean attention mass on position 0 (the <|endoftext|> BOS token), over
             queries 1..T-1 of held-out KJV windows (BOS + 255 tokens)
  prev-token per head: mean attention mass on position i-1, over queries i = 2..T-1 of the same
             windows (query 1 is left out: its previous token is the BOS)
  induction  per head: on BOS + R + R, R being L random tokens, mean attention from each token of
             the second copy (position L+1+j) to the token after its earlier occurrence
             (position j+2; the last one lands on the second copy's first token), as in Olsson
             et al. 2022 / TransformerLens
  copy loss  mean next-token loss on the tokens of R's first copy vs its second copy

Also writes phenomena.json (values a C++ test asserts against, with the probe token ids) and
golden/*.npy (logits and layer-0 attention for one fixed input) into the checkpoint folder.

  /usr/bin/python3 models/train/measure_text.py assets/models/default-text
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gpt2  # noqa: E402
import safetensors_io  # noqa: E402

GOLDEN_TEXT = "In the beginning God created the heaven and the earth."
INDUCTION_LEN = 50  # length of the random sequence R
INDUCTION_SEED = 1234
WINDOW = 256


def load_checkpoint(folder):
    with open(os.path.join(folder, "config.json")) as f:
        hf = json.load(f)
    cfg = gpt2.default_config(vocab_size=hf["vocab_size"], n_positions=hf["n_positions"],
                              n_embd=hf["n_embd"], n_layer=hf["n_layer"], n_head=hf["n_head"],
                              layer_norm_epsilon=hf["layer_norm_epsilon"],
                              bos_token_id=hf["bos_token_id"], eos_token_id=hf["eos_token_id"])
    model = gpt2.GPT2LMHeadModel(cfg)
    tensors, _ = safetensors_io.load_file(os.path.join(folder, "model.safetensors"))
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in
                                                 tensors.items()}, strict=False)
    if missing != ["lm_head.weight"] or unexpected:
        raise ValueError(f"checkpoint mismatch: missing {missing}, unexpected {unexpected}")
    model.eval()
    return model, bpe.Tokenizer.load(folder)


def heldout_windows(heldout_ids, bos, n, length=WINDOW):
    """n windows of BOS + (length-1) held-out tokens at evenly spaced offsets."""
    starts = np.linspace(0, len(heldout_ids) - length, n).astype(int)
    return torch.tensor([[bos] + list(heldout_ids[s:s + length - 1]) for s in starts])


def random_tokens(pool, n, length, seed):
    """n sequences of `length` tokens drawn uniformly from pool (a sorted list of ids)."""
    rng = np.random.default_rng(seed)
    return np.asarray(pool)[rng.integers(0, len(pool), size=(n, length))]


def induction_batch(pool, bos, n, length=INDUCTION_LEN, seed=INDUCTION_SEED):
    r = random_tokens(pool, n, length, seed)
    return torch.tensor(np.concatenate([np.full((n, 1), bos), r, r], axis=1))


@torch.no_grad()
def text_scores(model, windows):
    """Returns (sink [L, H], prev [L, H], loss) on held-out windows."""
    windows = windows.to(next(model.parameters()).device)
    logits, atts = model(windows, return_attentions=True)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                           windows[:, 1:].reshape(-1)).item()
    sink = torch.stack([a[:, :, 1:, 0].mean((0, 2)) for a in atts])
    prev = torch.stack([a.diagonal(offset=-1, dim1=-2, dim2=-1)[:, :, 1:].mean((0, 2))
                        for a in atts])
    return sink.cpu().numpy(), prev.cpu().numpy(), loss


@torch.no_grad()
def induction_scores(model, batch):
    """Returns (induction [L, H], loss on first copy, loss on second copy)."""
    n_rand = (batch.shape[1] - 1) // 2
    batch = batch.to(next(model.parameters()).device)
    logits, atts = model(batch, return_attentions=True)
    # Query L+1+j -> key j+2 lies on the diagonal at offset -(L-1), whose entry m is query
    # L-1+m: entries m = 2..L+1 are the second copy's queries.
    ind = torch.stack([a.diagonal(offset=-(n_rand - 1), dim1=-2, dim2=-1)[:, :, 2:].mean((0, 2))
                       for a in atts])
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), batch[:, 1:], reduction="none")
    first = nll[:, :n_rand].mean().item()  # targets at positions 1..L
    second = nll[:, n_rand:].mean().item()  # targets at positions L+1..2L
    return ind.cpu().numpy(), first, second


def best(scores, min_layer=0):
    """(layer, head, value) of the largest score among layers >= min_layer."""
    sub = scores[min_layer:]
    layer, head = np.unravel_index(np.argmax(sub), sub.shape)
    return int(layer) + min_layer, int(head), float(sub[layer, head])


def text_token_pool(train_ids, vocab_size, bos):
    """Ids that occur in the training text: what the random sequences are drawn from."""
    seen = np.zeros(vocab_size, dtype=bool)
    seen[np.asarray(train_ids)] = True
    seen[bos] = False
    return np.flatnonzero(seen).tolist()


def quick(model, heldout_ids, pool, bos):
    """Small, fast version of the measures for logging during training."""
    was_training = model.training
    model.eval()
    sink, prev, loss = text_scores(model, heldout_windows(heldout_ids, bos, 4))
    ind, l1, l2 = induction_scores(model, induction_batch(pool, bos, 4, seed=99))
    model.train(was_training)
    return {"heldout_loss": loss, "sink": best(sink, 1), "prev": best(prev),
            "induction": best(ind, 1), "copy_loss": (l1, l2)}


def r4(a):
    return np.round(np.asarray(a, dtype=np.float64), 4).tolist()


def measure(folder, heldout_ids, pool, n_windows=32, n_induction=32):
    model, tok = load_checkpoint(folder)
    bos = model.cfg["bos_token_id"]
    windows = heldout_windows(heldout_ids, bos, n_windows)
    sink, prev, loss = text_scores(model, windows)
    ind, l1, l2 = induction_scores(model, induction_batch(pool, bos, n_induction))

    # Fixed probes for the C++ test: one held-out window and one repeated random sequence.
    text_probe = heldout_windows(heldout_ids, bos, 1, length=128)
    p_sink, p_prev, p_loss = text_scores(model, text_probe)
    ind_probe = induction_batch(pool, bos, 1, seed=INDUCTION_SEED + 1)
    p_ind, p_l1, p_l2 = induction_scores(model, ind_probe)

    golden_ids = torch.tensor([[bos] + tok.encode(GOLDEN_TEXT)])
    with torch.no_grad():
        g_logits, g_atts = model(golden_ids, return_attentions=True)
    golden = os.path.join(folder, "golden")
    os.makedirs(golden, exist_ok=True)
    n_first = min(8, golden_ids.shape[1])
    np.save(os.path.join(golden, "input_ids.npy"), golden_ids.numpy().astype("<i4"))
    np.save(os.path.join(golden, "logits_first8.npy"), g_logits[:, :n_first].numpy().astype("<f4"))
    np.save(os.path.join(golden, "logits_last.npy"), g_logits[:, -1].numpy().astype("<f4"))
    np.save(os.path.join(golden, "attention_layer0.npy"), g_atts[0].numpy().astype("<f4"))
    top = torch.topk(g_logits[0, -1], 5)

    result = {
        "model": "default-text",
        "parameters": sum(p.numel() for p in model.parameters()),
        "heldout": {"windows": n_windows, "window_tokens": WINDOW, "loss": loss,
                    "perplexity": float(np.exp(loss))},
        "sink": {"best_layer_ge_1": best(sink, 1), "best_any_layer": best(sink),
                 "per_head": r4(sink)},
        "previous_token": {"best": best(prev), "per_head": r4(prev)},
        "induction": {"sequences": n_induction, "random_length": INDUCTION_LEN,
                      "seed": INDUCTION_SEED, "best_layer_ge_1": best(ind, 1),
                      "per_head": r4(ind), "loss_first_copy": l1, "loss_second_copy": l2},
        "thresholds": {"sink": 0.5, "previous_token": 0.5, "induction": 0.3},
        "probes": {
            "text": {"input_ids": text_probe[0].tolist(), "heldout_loss": p_loss,
                     "sink_per_head": r4(p_sink), "previous_token_per_head": r4(p_prev)},
            "induction": {"input_ids": ind_probe[0].tolist(), "random_length": INDUCTION_LEN,
                          "induction_per_head": r4(p_ind), "loss_first_copy": p_l1,
                          "loss_second_copy": p_l2},
        },
        "golden": {
            "text": GOLDEN_TEXT, "input_ids": golden_ids[0].tolist(),
            "top5_next_ids": top.indices.tolist(),
            "top5_next_tokens": [tok.decode([i]) for i in top.indices.tolist()],
            "files": {"input_ids.npy": "i4 [1, T]",
                      "logits_first8.npy": f"f4 [1, {n_first}, vocab]: positions 0..{n_first - 1}",
                      "logits_last.npy": "f4 [1, vocab]: last position",
                      "attention_layer0.npy": "f4 [1, heads, T, T] softmax probabilities"},
        },
    }
    return result


def main():
    import kjv  # the held-out split and token pool come from the corpus
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("folder")
    args = p.parse_args()
    torch.set_num_threads(1)
    _, tok = load_checkpoint(args.folder)
    train_text, heldout_text = kjv.split_text()
    bos = tok.vocab[bpe.ENDOFTEXT]
    pool = text_token_pool(tok.encode(train_text), len(tok.vocab), bos)
    result = measure(args.folder, tok.encode(heldout_text), pool)
    path = os.path.join(args.folder, "phenomena.json")
    old = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    result["training"] = old.get("training")
    result["model"] = old.get("model", result["model"])
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({k: result[k] for k in ("heldout", "induction")}, indent=1)[:2000])


if __name__ == "__main__":
    main()
