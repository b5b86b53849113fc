#!/usr/bin/python3
"""Trains attnscope's default vision model: a small ViT on Fashion-MNIST, saved as a Hugging Face
ViTForImageClassification checkpoint (model.safetensors + config.json + preprocessor_config.json),
plus sample images, measured phenomena and golden outputs for the C++ forward pass.

  nice -n 19 /usr/bin/python3 models/train/train_vision.py            # full run (~35 CPU-min)
  /usr/bin/python3 models/train/train_vision.py --epochs 1 --limit 2000 --out /tmp/v  # smoke test
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
import fashion_mnist  # noqa: E402
import png_io  # noqa: E402
import safetensors_io  # noqa: E402
import vit  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FG_THRESHOLD = 0.1  # a patch is foreground when its mean pixel (in [0, 1]) exceeds this


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--warmup-steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--flip", action="store_true", help="random horizontal flips (off by default)")
    p.add_argument("--init", default=None,
                   help="start from the checkpoint in this folder (its phenomena.json's training "
                        "settings are kept in the new one as 'continued_from')")
    p.add_argument("--measure-only", action="store_true",
                   help="skip training: re-measure the checkpoint already in --out")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="use only this many training images")
    p.add_argument("--out", default=os.path.join(REPO, "assets/models/default-vision"))
    p.add_argument("--images", default=None, help="sample image folder (default: assets/images "
                   "for the full run, <out>/images otherwise)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=128)
    return p.parse_args()


def normalise(images_u8, mean, std):
    """u8 [N, 28, 28] -> f32 [N, 1, 28, 28], exactly the preprocessor's rescale + normalize."""
    x = torch.from_numpy(images_u8.astype(np.float32)) * np.float32(1 / 255)
    return ((x - mean) / std).unsqueeze(1)


@torch.no_grad()
def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    for i in range(0, len(x), batch):
        correct += (model(x[i:i + batch]).argmax(-1) == y[i:i + batch]).sum().item()
    return correct / len(x)


def train(model, x, y, args):
    steps_per_epoch = math.ceil(len(x) / args.batch)
    total = steps_per_epoch * args.epochs
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay,
                            betas=(0.9, 0.999))
    lr_at = lambda s: args.lr * min(1.0, (s + 1) / args.warmup_steps) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, s / total)))
    gen = torch.Generator().manual_seed(args.seed)
    step, t0 = 0, time.time()
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x), generator=gen)
        loss_sum, seen = 0.0, 0
        for i in range(0, len(x), args.batch):
            idx = order[i:i + args.batch]
            xb, yb = x[idx], y[idx]
            if args.flip:
                flip = torch.rand(len(idx), generator=gen) < 0.5
                xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            seen += len(idx)
            step += 1
        print(f"epoch {epoch + 1}/{args.epochs} step {step} train_loss {loss_sum / seen:.4f} "
              f"elapsed {time.time() - t0:.0f}s", flush=True)
    return step, time.time() - t0


def foreground_masks(model, images_u8):
    """bool [N, P]: patches whose mean pixel in [0, 1] exceeds FG_THRESHOLD."""
    p = model.cfg["patch_size"]
    g = model.cfg["image_size"] // p
    patch_mean = images_u8.astype(np.float64).reshape(-1, g, p, g, p).mean((2, 4)).reshape(
        len(images_u8), -1) / 255
    return patch_mean > FG_THRESHOLD


def fg_bg_mass(cls_to_patches, fg_masks):
    """Per image (mean mass per fg patch, per bg patch); None without fg or without bg."""
    return [None if fg.all() or not fg.any() else (float(a[fg].mean()), float(a[~fg].mean()))
            for a, fg in zip(cls_to_patches, fg_masks)]


def cls_foreground_measure(model, images_u8, x, layer=-1, head=None):
    """CLS attention to the patches in one layer (mean over heads unless one head is given),
    as per-image (fg mass per patch, bg mass per patch) pairs."""
    model.eval()
    with torch.no_grad():
        _, atts = model(x, return_attentions=True)
    a = atts[layer][:, :, 0, 1:]  # [N, H, P]: CLS -> patches
    a = a.mean(1) if head is None else a[:, head]
    return fg_bg_mass(a.numpy(), foreground_masks(model, images_u8))


def fg_wins(pairs):
    return sum(1 for v in pairs if v is not None and v[0] > v[1])


def slug(name):
    return name.lower().replace("/", "_").replace("-", "_").replace(" ", "_")


def save_sample_images(images_u8, labels, folder):
    """16 test images: the first test image of each class, then a second of classes 0..5."""
    os.makedirs(folder, exist_ok=True)
    picks = []
    for k in range(16):
        cls, nth = k % 10, k // 10
        picks.append(int(np.flatnonzero(labels == cls)[nth]))
    entries = {}
    for k, idx in enumerate(picks):
        name = f"{slug(fashion_mnist.CLASS_NAMES[labels[idx]])}_{k // 10 + 1}.png"
        png_io.write_gray(os.path.join(folder, name), images_u8[idx])
        entries[name] = {"label": int(labels[idx]),
                         "class_name": fashion_mnist.CLASS_NAMES[labels[idx]],
                         "fashion_mnist_test_index": idx}
    with open(os.path.join(folder, "labels.json"), "w") as f:
        json.dump({"source": "Fashion-MNIST test set (Zalando Research, MIT licence), "
                             "Debian package dataset-fashion-mnist",
                   "images": entries}, f, indent=2)
        f.write("\n")
    return entries


def hf_config(args, n_params):
    names = fashion_mnist.CLASS_NAMES
    return {
        "architectures": ["ViTForImageClassification"],
        "model_type": "vit",
        "image_size": 28, "patch_size": 4, "num_channels": 1,
        "hidden_size": args.hidden, "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads, "intermediate_size": args.intermediate,
        "hidden_act": "gelu", "layer_norm_eps": 1e-12, "qkv_bias": True,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "initializer_range": 0.02, "encoder_stride": 4,
        "id2label": {str(i): n for i, n in enumerate(names)},
        "label2id": {n: i for i, n in enumerate(names)},
        "problem_type": "single_label_classification",
        "torch_dtype": "float32",
    }


def preprocessor_config(mean, std):
    return {
        "image_processor_type": "ViTImageProcessor",
        "do_resize": True, "size": {"height": 28, "width": 28}, "resample": 2,
        "do_rescale": True, "rescale_factor": 1 / 255,
        "do_normalize": True, "image_mean": [mean], "image_std": [std],
        "grayscale": True,
    }


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    full_run = args.limit == 0
    images_dir = args.images or (os.path.join(REPO, "assets/images") if full_run else
                                 os.path.join(args.out, "images"))
    os.makedirs(args.out, exist_ok=True)

    tr_img, tr_lab = fashion_mnist.load("train")
    te_img, te_lab = fashion_mnist.load("test")
    if args.limit:
        tr_img, tr_lab = tr_img[:args.limit], tr_lab[:args.limit]
    # Normalisation constants from the training images, rounded so they read well in JSON.
    mean = round(float(tr_img.mean() / 255), 4)
    std = round(float((tr_img / 255).std()), 4)
    x_tr, y_tr = normalise(tr_img, mean, std), torch.from_numpy(tr_lab.astype(np.int64))
    x_te, y_te = normalise(te_img, mean, std), torch.from_numpy(te_lab.astype(np.int64))

    cfg = vit.default_config(hidden_size=args.hidden, num_hidden_layers=args.layers,
                             num_attention_heads=args.heads, intermediate_size=args.intermediate)
    model = vit.ViTForImageClassification(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters {n_params}  mean {mean} std {std}", flush=True)
    continued_from = None
    if args.init and not args.measure_only:
        init_state, _ = safetensors_io.load_file(os.path.join(args.init, "model.safetensors"))
        model.load_state_dict({k: torch.from_numpy(v) for k, v in init_state.items()}, strict=True)
        with open(os.path.join(args.init, "phenomena.json")) as f:
            prev = json.load(f)
        continued_from = dict(prev["training"])
        # Runs before the --flip option always flipped.
        continued_from.setdefault("flip", True)
        continued_from["test_accuracy"] = prev["test_accuracy"]
        print(f"starting from {args.init} (test accuracy {prev['test_accuracy']:.4f})", flush=True)

    if args.measure_only:
        with open(os.path.join(args.out, "phenomena.json")) as f:
            training = json.load(f)["training"]
        steps, wall = training["steps"], training["wall_seconds"]
    else:
        cpu0 = time.process_time()
        steps, wall = train(model, x_tr, y_tr, args)
        cpu = round(time.process_time() - cpu0)
        training = {"seed": args.seed, "epochs": args.epochs, "steps": steps, "flip": args.flip,
                    "batch": args.batch, "lr": args.lr, "weight_decay": args.weight_decay,
                    "warmup_steps": args.warmup_steps, "wall_seconds": round(wall),
                    "cpu_seconds": cpu, "threads": args.threads, "torch": torch.__version__}
        if continued_from:
            training["continued_from"] = continued_from
        model.eval()
        test_acc = evaluate(model, x_te, y_te)
        print(f"test accuracy {test_acc:.4f}  wall {wall:.0f}s", flush=True)
        state = {k: v.detach().numpy().astype("<f4") for k, v in model.state_dict().items()}
        safetensors_io.save_file(state, os.path.join(args.out, "model.safetensors"),
                                 metadata={"format": "pt"})
        write_json(os.path.join(args.out, "config.json"), hf_config(args, n_params))
        write_json(os.path.join(args.out, "preprocessor_config.json"),
                   preprocessor_config(mean, std))

    # Measure the saved file in a fresh module: what we measure is what we ship.
    loaded, _ = safetensors_io.load_file(os.path.join(args.out, "model.safetensors"))
    model = vit.ViTForImageClassification(cfg)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in loaded.items()}, strict=True)
    model.eval()
    reloaded_acc = evaluate(model, x_te, y_te)
    if args.measure_only:
        test_acc = reloaded_acc
    elif reloaded_acc != test_acc:
        raise RuntimeError("reloaded checkpoint gives a different test accuracy")

    # Sample images, read back from the PNGs so that the numbers are those of the files.
    entries = save_sample_images(te_img, te_lab, images_dir)
    names = sorted(entries)
    imgs = np.stack([png_io.read_gray(os.path.join(images_dir, n)) for n in names])
    labs = np.array([entries[n]["label"] for n in names])
    x_s = normalise(imgs, mean, std)
    with torch.no_grad():
        logits_s, atts_s = model(x_s, return_attentions=True)
    pred_s = logits_s.argmax(-1).numpy()
    sample_acc = float((pred_s == labs).mean())
    fg_s = cls_foreground_measure(model, imgs, x_s)

    fg100 = cls_foreground_measure(model, te_img[:100], x_te[:100])
    valid = [v for v in fg100 if v is not None]
    wins = fg_wins(fg100)
    ratio = float(np.mean([f / b for f, b in valid]))
    n_layers, n_heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    per_layer = [fg_wins(cls_foreground_measure(model, te_img[:100], x_te[:100], layer=i))
                 for i in range(n_layers)]
    per_head = [[fg_wins(cls_foreground_measure(model, te_img[:100], x_te[:100], i, h))
                 for h in range(n_heads)] for i in range(n_layers)]
    print(f"sample accuracy {sample_acc:.4f}; last-layer CLS fg>bg on {wins}/{len(valid)} of "
          f"the first 100 test images (mean fg/bg ratio {ratio:.2f}); per layer {per_layer}; "
          f"per head {per_head}", flush=True)

    # Golden outputs for the C++ forward pass: the first bundled image (file order).
    golden = os.path.join(args.out, "golden")
    os.makedirs(golden, exist_ok=True)
    probe = names[0]
    np.save(os.path.join(golden, "input_pixel_values.npy"), x_s[:1].numpy().astype("<f4"))
    np.save(os.path.join(golden, "logits.npy"), logits_s[:1].numpy().astype("<f4"))
    np.save(os.path.join(golden, "attention_layer0.npy"), atts_s[0][:1].numpy().astype("<f4"))
    np.save(os.path.join(golden, "attention_last_layer.npy"),
            atts_s[-1][:1].numpy().astype("<f4"))

    phenomena = {
        "model": "default-vision",
        "parameters": n_params,
        "test_accuracy": test_acc,
        "test_images": len(te_img),
        "sample_images_accuracy": sample_acc,
        "cls_foreground": {
            "definition": "last layer, CLS query, attention averaged over heads; foreground "
                          "patch: mean pixel/255 > threshold; per-image mean mass per fg patch "
                          "vs per bg patch",
            "threshold": FG_THRESHOLD,
            "test_images_first_n": 100,
            "images_with_fg_and_bg": len(valid),
            "fg_greater_than_bg": wins,
            "mean_fg_over_bg_ratio": ratio,
            "fg_greater_than_bg_per_layer_mean_over_heads": per_layer,
            "fg_greater_than_bg_per_layer_per_head": per_head,
        },
        "probes": [
            {"image": f"assets/images/{n}", "label": int(labs[i]), "predicted": int(pred_s[i]),
             "logits": [round(float(v), 6) for v in logits_s[i]],
             "cls_fg_mass_per_patch": None if fg_s[i] is None else round(fg_s[i][0], 6),
             "cls_bg_mass_per_patch": None if fg_s[i] is None else round(fg_s[i][1], 6)}
            for i, n in enumerate(names)],
        "golden": {
            "image": f"assets/images/{probe}",
            "files": {"input_pixel_values.npy": "f32 [1, 1, 28, 28] after rescale+normalize",
                      "logits.npy": "f32 [1, 10]",
                      "attention_layer0.npy": "f32 [1, heads, 50, 50] softmax probabilities",
                      "attention_last_layer.npy": "f32 [1, heads, 50, 50]"},
        },
        "training": training,
    }
    write_json(os.path.join(args.out, "phenomena.json"), phenomena)
    print("wrote", args.out, flush=True)


if __name__ == "__main__":
    main()
