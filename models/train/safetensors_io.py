"""Minimal reader/writer of the safetensors format (https://github.com/huggingface/safetensors).

Layout of a file:
  8 bytes    little-endian u64 N, the size of the JSON header in bytes (padding included)
  N bytes    UTF-8 JSON: {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets"}}
             padded with spaces so that the data starts at an 8-byte aligned offset
  rest       raw little-endian tensor data; data_offsets [begin, end) are relative to it

Tensors are written in name order, contiguous, with no gaps, which is what the reference
implementation produces and what strict readers (ours in C++) accept.
"""

import json
import struct

import numpy as np

# safetensors dtype tag -> numpy little-endian dtype. BF16 has no numpy type: stored as raw u2.
_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
_TAGS = {np.dtype(v).str: k for k, v in _DTYPES.items() if k != "BF16"}


def _tag_of(array):
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    tag = _TAGS.get(dtype.str)
    if tag is None:
        raise ValueError(f"unsupported dtype {array.dtype} for safetensors")
    return tag


def save_file(tensors, path, metadata=None):
    """Writes a dict name -> numpy array. metadata: optional dict str -> str."""
    header = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("tensor name __metadata__ is reserved")
        arr = np.asarray(tensors[name])
        tag = _tag_of(arr)
        data = np.ascontiguousarray(arr, dtype=np.dtype(_DTYPES[tag])).tobytes()
        header[name] = {"dtype": tag, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def load_file(path):
    """Returns (dict name -> numpy array, metadata dict or None). Validates bounds and layout."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds file size {len(raw)}")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    metadata = header.pop("__metadata__", None)
    tensors = {}
    spans = []
    for name, info in header.items():
        tag = info["dtype"]
        if tag not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unknown dtype {tag}")
        dtype = np.dtype(_DTYPES[tag])
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError(f"{path}: tensor {name}: bad data_offsets [{begin}, {end})")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape).copy()
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        if begin != pos:
            raise ValueError(f"{path}: tensor data has a gap or overlap at byte {pos}")
        pos = end
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} trailing bytes after tensor data")
    return tensors, metadata
