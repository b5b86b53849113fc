"""Tiny PNG writer/reader for 8-bit grayscale images (colour type 0), pure Python + zlib.

Only what the bundled sample images need: no interlacing, no palettes, no other bit depths.
The reader accepts every PNG filter type so that files re-saved by other tools still load.
"""

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def write_gray(path, image):
    """image: uint8 array [H, W]."""
    image = np.asarray(image)
    if image.ndim != 2 or image.dtype != np.uint8:
        raise ValueError("write_gray expects a uint8 array [H, W]")
    h, w = image.shape
    rows = b"".join(b"\x00" + image[y].tobytes() for y in range(h))  # filter 0 on every row
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(rows, 9)) +
                _chunk(b"IEND", b""))


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def read_gray(path):
    """Returns a uint8 array [H, W] from an 8-bit grayscale, non-interlaced PNG."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] != _SIGNATURE:
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, header = 8, b"", None
    while pos < len(raw):
        (n,) = struct.unpack(">I", raw[pos:pos + 4])
        kind, data = raw[pos + 4:pos + 8], raw[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            idat += data
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path}: missing IHDR")
    w, h, depth, colour, _, _, interlace = header
    if depth != 8 or colour != 0 or interlace != 0:
        raise ValueError(f"{path}: only 8-bit grayscale non-interlaced PNG is supported")
    rows = zlib.decompress(idat)
    out = np.zeros((h, w), dtype=np.uint8)
    prev = [0] * w
    for y in range(h):
        ftype = rows[y * (w + 1)]
        line = list(rows[y * (w + 1) + 1:(y + 1) * (w + 1)])
        for x in range(w):
            left = line[x - 1] if x else 0
            up, upleft = prev[x], (prev[x - 1] if x else 0)
            pred = (0, left, up, (left + up) // 2, _paeth(left, up, upleft))[ftype]
            line[x] = (line[x] + pred) & 0xFF
        out[y] = line
        prev = line
    return out
