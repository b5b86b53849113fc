// NumPy .npy files (format versions 1.0, 2.0, 3.0) and .npz archives (stored or deflated), read
// as NumPy reads them. Arrays are held C-ordered and little-endian; big-endian files are swapped
// on read. Fortran-ordered arrays are refused with a message saying how to re-save them.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "models/formats/dtype.h"

namespace attn::models {

struct NpyArray {
  DType dtype = DType::F32;    // '<f4' F32, '<f2' F16, '<f8' F64, '<i4' I32, '<i8' I64,
                               // '|i1' I8, '<i2' I16, '|u1' U8, '|b1' Bool
  std::vector<int64_t> shape;  // () is a scalar with one element
  std::vector<uint8_t> data;   // numel x dtype_size bytes, little-endian, C order

  size_t numel() const;
  std::vector<float> to_f32() const;
  // Builds an F32 array of `shape` from `values` (numel must match).
  static NpyArray from_f32(std::vector<int64_t> shape, std::span<const float> values);
};

// NumPy's descr string for a dtype, e.g. "<f4" or "|u1".
std::string npy_descr(DType dtype);

// Reads a .npy file. Throws Error(Io) when unreadable, Error(Format) when malformed,
// Error(Unsupported) for fortran_order True or a dtype outside the list above.
NpyArray read_npy(const std::string& path);
// Parses .npy bytes; `name` names them in messages.
NpyArray parse_npy(std::span<const uint8_t> bytes, const std::string& name);
// Serialises as NumPy does: version 1.0 (2.0 when the header needs it), header padded to 64.
std::vector<uint8_t> serialize_npy(const NpyArray& array);
void write_npy(const std::string& path, const NpyArray& array);

// Reads every array of a .npz archive, keyed by name without ".npy" (np.savez's keys).
std::map<std::string, NpyArray> read_npz(const std::string& path);
// Writes a .npz archive; `compress` deflates entries as np.savez_compressed does.
void write_npz(const std::string& path, const std::map<std::string, NpyArray>& arrays,
               bool compress = false);

}  // namespace attn::models
