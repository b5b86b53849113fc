// The weights of a checkpoint for the forward pass. Matrices (get_matrix) are used in place from
// the memory map in the dtype they are stored in (f32, bf16, f16: the GEMMs read all three), so a
// BF16 checkpoint costs its file size; vectors (get: norms, biases, small embeddings) are f32,
// converted once at load into buffers this store owns when stored otherwise (also F64, and
// unaligned tensors). Every lookup checks the tensor's shape against what the
// config implies and names the tensor, the file and both shapes when they differ.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "models/arch/layers.h"
#include "models/formats/safetensors.h"

namespace attn::models {

struct ModelInfo;

class WeightStore {
 public:
  // Opens the checkpoint of a model folder (model.safetensors or its sharded index). Throws
  // Error(Io) naming the folder and the files looked for when there is none.
  explicit WeightStore(const std::string& dir);

  // Name prefixes tried in order before the bare name: HF task models store the base model
  // under "transformer.", "model.", "bert.", "vit.", "deit.", ... and bare checkpoints do not.
  void set_prefixes(std::vector<std::string> prefixes) { prefixes_ = std::move(prefixes); }

  // True when `name` exists (under any prefix; LayerNorm ".weight"/".bias" also found under
  // the old ".gamma"/".beta" spellings).
  bool has(const std::string& name) const { return !resolve(name).empty(); }
  // The tensor `name` as f32 with exactly `shape`. Throws Error(Format) naming the tensor and
  // the file when it is missing or its shape differs (`what` says what the config implies).
  const float* get(const std::string& name, const std::vector<int64_t>& shape,
                   const std::string& what = "") const;
  // As get(), or nullptr when absent.
  const float* get_optional(const std::string& name, const std::vector<int64_t>& shape,
                            const std::string& what = "") const;

  // The matrix `name` with exactly `shape`, in place when stored as F32, BF16 or F16 (aligned to
  // its element size); other float dtypes are converted to f32 once. Throws as get().
  Matrix get_matrix(const std::string& name, const std::vector<int64_t>& shape,
                    const std::string& what = "") const;
  // As get_matrix(), or an empty Matrix when absent.
  Matrix get_matrix_optional(const std::string& name, const std::vector<int64_t>& shape,
                             const std::string& what = "") const;

  // The stored shape of `name` (empty when absent).
  std::vector<int64_t> shape_of(const std::string& name) const;

  // Path of the checkpoint (file or index), for messages.
  const std::string& path() const { return ckpt_.path(); }
  // Bytes converted to f32 copies so far (0 for an all-F32, aligned checkpoint; the vectors only
  // for a BF16 one).
  size_t converted_bytes() const { return converted_bytes_; }
  // Bytes of tensors used in place from the memory map.
  size_t mapped_bytes() const { return mapped_bytes_; }
  // The dtype of the matrices returned so far: "f32", "bf16", "f16", or "mixed".
  std::string matrix_dtype() const;
  // Fills info's weight_dtype and byte counts (each architecture calls it once it has loaded).
  void describe(ModelInfo& info) const;

 private:
  // The tensor `name` checked against `shape`, or nullptr when absent.
  const TensorView* find(const std::string& name, const std::vector<int64_t>& shape,
                         const std::string& what) const;
  // Missing-tensor error.
  [[noreturn]] void missing(const std::string& name, const std::string& what) const;
  // An owned f32 copy of `t`.
  const float* convert(const TensorView& t) const;
  // `t` as f32: in place when stored as aligned F32, else convert(t).
  const float* as_f32(const TensorView& t) const;

  // The stored name `name` resolves to, or "" when absent.
  std::string resolve(const std::string& name) const;

  SafetensorsCheckpoint ckpt_;
  std::vector<std::string> prefixes_;
  mutable std::deque<std::unique_ptr<float[]>> converted_;  // owned f32 copies
  mutable size_t converted_bytes_ = 0;
  mutable size_t mapped_bytes_ = 0;
  mutable unsigned matrix_types_ = 0;  // bit per cpu::ElemType seen by get_matrix
};

// "[768, 2304]" for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace attn::models
