// IDX files (LeCun's MNIST format, also Fashion-MNIST's), plain or gzip-compressed: a big-endian
// header (two zero bytes, a type code, the number of dimensions, then each dimension as a u32)
// followed by the elements in row-major order. Unsigned bytes (type 0x08) only: the images and
// labels of MNIST-style datasets.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace attn::models {

struct IdxArray {
  std::vector<int64_t> shape;  // [count, rows, cols] for images, [count] for labels
  std::vector<uint8_t> data;   // row-major
};

// Reads `path` (gzip detected from its magic bytes). Throws Error(Io) when the file cannot be
// read and Error(Format) naming the file for a bad magic, another element type, no or more than
// 4 dimensions, a zero dimension, more than kMaxTensorBytes of elements, a broken gzip stream,
// fewer bytes than the header promises or bytes after them. Nothing proportional to the header's
// sizes is allocated before that many bytes have actually been read.
IdxArray read_idx(const std::string& path);

}  // namespace attn::models
