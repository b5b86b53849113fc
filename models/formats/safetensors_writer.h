// Writes .safetensors files (header padded to 8 bytes, tensors packed in the order given), so
// that tests and exports produce files the reference reader opens.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "models/formats/dtype.h"

namespace attn::models {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;      // [] for a scalar
  std::span<const uint8_t> bytes;  // little-endian elements, row-major; numel x dtype size
};

// Writes `tensors` to `path`; throws Error(InvalidArgument) when a byte count does not match its
// shape or a name repeats, Error(Io) when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace attn::models
