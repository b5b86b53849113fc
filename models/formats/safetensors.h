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
#include <vector>

#include "models/formats/dtype.h"
#include "models/formats/mapped_file.h"

namespace attn {

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
  // Zero-copy f32 view; throws Error(Format) when the dtype is not F32 or the data is misaligned.
  std::span<const float> f32() const;
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

}  // namespace attn
