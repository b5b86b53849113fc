#include "models/formats/safetensors_writer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "compute/error.h"

namespace attn::models {

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the header in the order written, which readers show to people.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    require(t.name != "__metadata__" && seen.insert(t.name).second, ErrorCode::InvalidArgument,
            path + ": tensor name '" + t.name + "' repeats or is reserved");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      require(d >= 0, ErrorCode::InvalidArgument, path + ": tensor '" + t.name + "': negative dim");
      numel *= static_cast<uint64_t>(d);
    }
    require(numel * dtype_size(t.dtype) == t.bytes.size(), ErrorCode::InvalidArgument,
            path + ": tensor '" + t.name + "': " + std::to_string(t.bytes.size()) +
                " bytes given, shape x dtype needs " + std::to_string(numel * dtype_size(t.dtype)));
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  require(bool(out), ErrorCode::Io, path + ": cannot open for writing");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const TensorToWrite& t : tensors) {
    out.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
  }
  out.close();
  require(bool(out), ErrorCode::Io, path + ": write failed");
}

}  // namespace attn::models
