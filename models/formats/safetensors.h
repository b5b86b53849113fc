// Safetensors checkpoints, read through a read-only memory mapping: tensors are views into the
// mapping and no weight byte is copied until a caller asks for f32.
//
// Layout of a .safetensors file: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to its start. Every offset, size and dtype is
// checked on open, as the reference reader does: tensors must tile the data section exactly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "models/formats/dtype.h"
#include "models/formats/mapped_file.h"

namespace attn::models {

// One tensor inside a mapped file. Valid while the file object that produced it lives.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;     // [] for a scalar
  const uint8_t* data = nullptr;  // little-endian elements, row-major, inside the mapping
  size_t nbytes = 0;
  std::string file;  // path of the file that holds it, for messages

  size_t numel() const;
  // Converts every element to f32 (exact for F32/F16/BF16).
  std::vector<float> to_f32() const;
  // Converts into `dst`, which must hold numel() floats.
  void to_f32(std::span<float> dst) const;
  // Zero-copy typed view: float (F32), double (F64), int64_t (I64), int32_t (I32), int16_t (I16),
  // int8_t (I8), uint8_t (U8, BOOL), uint16_t (raw F16 / BF16 bits). Throws Error(Format) naming
  // the tensor when T does not fit the dtype or the data is not aligned for T.
  template <typename T>
  std::span<const T> view() const {
    check_view(dtype_fits<T>(), alignof(T), "view");
    return {reinterpret_cast<const T*>(data), numel()};
  }
  std::span<const float> f32() const { return view<float>(); }

 private:
  template <typename T>
  bool dtype_fits() const {
    if constexpr (std::is_same_v<T, float>) return dtype == DType::F32;
    if constexpr (std::is_same_v<T, double>) return dtype == DType::F64;
    if constexpr (std::is_same_v<T, int64_t>) return dtype == DType::I64;
    if constexpr (std::is_same_v<T, int32_t>) return dtype == DType::I32;
    if constexpr (std::is_same_v<T, int16_t>) return dtype == DType::I16;
    if constexpr (std::is_same_v<T, int8_t>) return dtype == DType::I8;
    if constexpr (std::is_same_v<T, uint8_t>) return dtype == DType::U8 || dtype == DType::Bool;
    if constexpr (std::is_same_v<T, uint16_t>) return dtype == DType::F16 || dtype == DType::BF16;
    return false;
  }
  void check_view(bool fits, size_t align, const char* what) const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws Error(Io) when unreadable, Error(Format) when malformed,
  // Error(Unsupported) for a dtype this library cannot hold (e.g. F8_E4M3); messages name the
  // file and, where there is one, the tensor.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Tensor names in data order.
  const std::vector<std::string>& names() const { return names_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // The named tensor; throws Error(Format) naming the file and the tensor when absent.
  const TensorView& tensor(const std::string& name) const;
  // The optional "__metadata__" string map.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<std::string> names_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A whole checkpoint: one .safetensors file or the shards listed in model.safetensors.index.json.
class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file, an *.index.json file, or a folder holding
  // model.safetensors.index.json or model.safetensors.
  static SafetensorsCheckpoint open(const std::string& path);

  // Names of all tensors, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // The named tensor; throws Error(Format) naming the checkpoint and the tensor when absent.
  const TensorView& tensor(const std::string& name) const;
  // Path of what was opened (file or index).
  const std::string& path() const { return path_; }
  size_t num_files() const { return files_.size(); }

 private:
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace attn::models
