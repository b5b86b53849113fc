#include "models/arch/dump.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compute/error.h"
#include "models/formats/npy.h"

namespace attn::models {
namespace fs = std::filesystem;

std::vector<std::string> dump_forward(const std::string& dir, const Capture& capture,
                                      const ModelInput& in, const ModelOutput& out,
                                      const std::vector<std::string>& labels,
                                      const HookSelection* only) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(fs::is_directory(dir, ec), ErrorCode::Io, dir + ": cannot create the dump folder");
  std::vector<std::string> written;
  auto save = [&](const std::string& name, std::vector<int64_t> shape, const float* data) {
    size_t n = 1;
    for (int64_t s : shape) n *= size_t(s);
    const std::string path = (fs::path(dir) / (name + ".npy")).string();
    write_npy(path, NpyArray::from_f32(std::move(shape), std::span<const float>(data, n)));
    written.push_back(path);
  };
  for (const HookTensor& t : capture.tensors()) {
    if (!only || only->matches(t.name)) save(t.name, t.shape, t.data);
  }
  const int64_t n = out.n_tokens;
  if (!out.logits.empty()) {
    if (out.logits.size() == size_t(out.n_logits)) {
      save("logits", {out.n_logits}, out.logits.data());
    } else {
      save("logits", {n, out.n_logits}, out.logits.data());
    }
  }
  if (!out.hidden_state.empty()) save("hidden", {n, out.hidden}, out.hidden_state.data());
  if (!in.image.empty()) {
    save("pixels", {in.image.channels, in.image.height, in.image.width}, in.image.data.data());
  }
  if (!in.ids.empty()) {
    NpyArray ids;
    ids.dtype = DType::I32;
    ids.shape = {int64_t(in.ids.size())};
    ids.data.resize(in.ids.size() * sizeof(int32_t));
    std::memcpy(ids.data.data(), in.ids.data(), ids.data.size());
    const std::string path = (fs::path(dir) / "ids.npy").string();
    write_npy(path, ids);
    written.push_back(path);
  }
  if (!labels.empty()) {
    const std::string path = (fs::path(dir) / "labels.json").string();
    std::ofstream f(path);
    f << nlohmann::json(labels).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
      << "\n";
    require(bool(f), ErrorCode::Io, path + ": cannot write");
    written.push_back(path);
  }
  return written;
}

}  // namespace attn::models
