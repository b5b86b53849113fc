// The weights of a checkpoint as f32 matrices for the forward pass. F32 tensors are used in place
// from the memory map (no copy); F16/BF16 (and unaligned F32) tensors are converted once, at
// load, into buffers this store owns. Every lookup checks the tensor's shape against what the
// config implies and names the tensor, the file and both shapes when they differ.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "models/formats/safetensors.h"

namespace attn::models {

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

  // The stored shape of `name` (empty when absent).
  std::vector<int64_t> shape_of(const std::string& name) const;

  // Path of the checkpoint (file or index), for messages.
  const std::string& path() const { return ckpt_.path(); }
  // Bytes converted to f32 copies so far (0 for an all-F32, aligned checkpoint).
  size_t converted_bytes() const { return converted_bytes_; }

 private:
  // The stored name `name` resolves to, or "" when absent.
  std::string resolve(const std::string& name) const;

  SafetensorsCheckpoint ckpt_;
  std::vector<std::string> prefixes_;
  mutable std::deque<std::unique_ptr<float[]>> converted_;  // owned f32 copies
  mutable size_t converted_bytes_ = 0;
};

// "[768, 2304]" for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace attn::models
