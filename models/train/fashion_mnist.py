"""Fashion-MNIST from the Debian package dataset-fashion-mnist (IDX files, gzip)."""

import gzip
import os
import struct

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]


def _read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split, data_dir=DATA_DIR):
    """split: "train" (60000) or "test" (10000). Returns (images u8 [N, 28, 28], labels u8 [N])."""
    prefix = {"train": "train", "test": "t10k"}[split]
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"{data_dir} missing: apt-get install dataset-fashion-mnist")
    images = _read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = _read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    if len(images) != len(labels):
        raise ValueError(f"Fashion-MNIST {split}: {len(images)} images but {len(labels)} labels")
    return images, labels
