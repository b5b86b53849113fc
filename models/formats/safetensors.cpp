#include "models/formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compute/error.h"
#include "models/formats/limits.h"

namespace attn::models {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& file, const std::string& what) {
  throw Error(code, file + ": " + what);
}

// Dtypes that safetensors defines but this library does not hold.
bool is_known_unsupported(const std::string& name) {
  return name == "U16" || name == "U32" || name == "U64" || name.rfind("F8_", 0) == 0 ||
         name.rfind("F6_", 0) == 0 || name.rfind("F4", 0) == 0;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

// The 8-byte little-endian header length and the JSON header after it, checked against the
// file's size and kMaxSafetensorsHeaderBytes.
json read_header(const MappedFile& file, const std::string& path, uint64_t* header_len_out) {
  const size_t size = file.size();
  if (size < 8) {
    fail(ErrorCode::Format, path,
         "truncated: " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file.data()[i];
  if (header_len > size - 8) {
    fail(ErrorCode::Format, path,
         "header length " + std::to_string(header_len) + " runs past the end of the file (" +
             std::to_string(size) + " bytes)");
  }
  if (header_len > kMaxSafetensorsHeaderBytes) {
    fail(ErrorCode::Format, path,
         "header length " + std::to_string(header_len) + " exceeds the limit of " +
             std::to_string(kMaxSafetensorsHeaderBytes) + " bytes (kMaxSafetensorsHeaderBytes)");
  }
  const char* header_begin = reinterpret_cast<const char*>(file.data() + 8);
  if (header_len == 0 || header_begin[0] != '{') {
    fail(ErrorCode::Format, path, "header is not a JSON object");
  }
  json header;
  try {
    header = json::parse(header_begin, header_begin + header_len);
  } catch (const json::exception& e) {
    fail(ErrorCode::Format, path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(ErrorCode::Format, path, "header is not a JSON object");
  *header_len_out = header_len;
  return header;
}

std::map<std::string, std::string> read_metadata(const json& entry, const std::string& path) {
  if (!entry.is_object()) fail(ErrorCode::Format, path, "__metadata__ is not an object");
  std::map<std::string, std::string> out;
  for (auto m = entry.begin(); m != entry.end(); ++m) {
    if (!m.value().is_string()) {
      fail(ErrorCode::Format, path, "__metadata__ value '" + m.key() + "' is not a string");
    }
    out[m.key()] = m.value().get<std::string>();
  }
  return out;
}

// The dtype of a header entry; unknown and unsupported names are told apart.
DType read_dtype(const json& entry, const std::string& path, const std::string& where) {
  auto dt = entry.find("dtype");
  if (dt == entry.end() || !dt->is_string()) {
    fail(ErrorCode::Format, path, where + "missing string 'dtype'");
  }
  const std::string dname = dt->get<std::string>();
  DType dtype{};
  if (!dtype_from_name(dname, &dtype)) {
    if (is_known_unsupported(dname)) {
      fail(ErrorCode::Unsupported, path, where + "dtype " + dname + " is not supported");
    }
    fail(ErrorCode::Format, path, where + "unknown dtype '" + dname + "'");
  }
  return dtype;
}

// The shape of a header entry and the bytes it needs in `dtype`, bounded by kMaxTensorBytes.
uint64_t read_shape(const json& entry, DType dtype, const std::string& path,
                    const std::string& where, std::vector<int64_t>& shape) {
  auto sh = entry.find("shape");
  if (sh == entry.end() || !sh->is_array()) {
    fail(ErrorCode::Format, path, where + "missing array 'shape'");
  }
  uint64_t numel = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) {
      fail(ErrorCode::Format, path, where + "shape entries must be non-negative integers");
    }
    const uint64_t dim = d.get<uint64_t>();
    if (dim > uint64_t(INT64_MAX) || mul_overflows(numel, dim, &numel)) {
      fail(ErrorCode::Format, path, where + "shape overflows");
    }
    shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t bytes = 0;
  if (mul_overflows(numel, dtype_size(dtype), &bytes)) {
    fail(ErrorCode::Format, path, where + "shape overflows");
  }
  if (bytes > kMaxTensorBytes) {
    fail(ErrorCode::Format, path,
         where + "shape x " + dtype_name(dtype) + " needs " + std::to_string(bytes) +
             " bytes, over the limit of " + std::to_string(kMaxTensorBytes) +
             " bytes per tensor (kMaxTensorBytes)");
  }
  return bytes;
}

// One tensor's header entry, its bytes checked against its shape and the data section; `begin`
// receives its offset into the section (the caller points `data` there).
TensorView read_entry(const std::string& name, const json& entry, const std::string& path,
                      uint64_t data_size, uint64_t* begin_out) {
  const std::string where = "tensor '" + name + "': ";
  if (!entry.is_object()) fail(ErrorCode::Format, path, where + "entry is not an object");
  TensorView view;
  view.name = name;
  view.file = path;
  view.dtype = read_dtype(entry, path, where);
  const uint64_t expected_bytes = read_shape(entry, view.dtype, path, where, view.shape);
  auto off = entry.find("data_offsets");
  if (off == entry.end() || !off->is_array() || off->size() != 2 ||
      !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
    fail(ErrorCode::Format, path, where + "'data_offsets' must be [begin, end] (non-negative)");
  }
  const uint64_t begin = (*off)[0].get<uint64_t>();
  const uint64_t end = (*off)[1].get<uint64_t>();
  const std::string range = "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
  if (begin > end) fail(ErrorCode::Format, path, where + "data_offsets " + range + " are reversed");
  if (end > data_size) {
    fail(ErrorCode::Format, path,
         where + "data_offsets " + range + " out of range: the data section has " +
             std::to_string(data_size) + " bytes (file truncated?)");
  }
  if (end - begin != expected_bytes) {
    fail(ErrorCode::Format, path,
         where + "data_offsets " + range + " hold " + std::to_string(end - begin) +
             " bytes but shape x " + dtype_name(view.dtype) + " needs " +
             std::to_string(expected_bytes));
  }
  view.nbytes = end - begin;
  *begin_out = begin;
  return view;
}

struct Span {
  uint64_t begin, end;
  std::string name;
};

// Tensors must tile the data section: no overlap, no hole, no trailing bytes. Returns the
// tensor names in file order.
std::vector<std::string> check_tiling(std::vector<Span> spans, uint64_t data_size,
                                      const std::string& path) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::vector<std::string> names;
  uint64_t covered = 0;
  const Span* prev = nullptr;
  for (const Span& s : spans) {
    if (s.begin < covered) {
      fail(ErrorCode::Format, path,
           "tensor '" + s.name + "': data_offsets overlap those of tensor '" + prev->name + "'");
    }
    if (s.begin > covered) {
      fail(ErrorCode::Format, path,
           "tensor '" + s.name + "': data starts at byte " + std::to_string(s.begin) +
               ", leaving a hole after byte " + std::to_string(covered));
    }
    covered = s.end;
    prev = &s;
    names.push_back(s.name);
  }
  if (covered != data_size) {
    fail(ErrorCode::Format, path,
         "tensors cover " + std::to_string(covered) + " bytes but the data section has " +
             std::to_string(data_size));
  }
  return names;
}

}  // namespace

size_t TensorView::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::vector<float> TensorView::to_f32() const {
  std::vector<float> out(numel());
  to_f32(out);
  return out;
}

void TensorView::to_f32(std::span<float> dst) const {
  require(dst.size() == numel(), ErrorCode::InvalidArgument,
          file + ": tensor '" + name + "': destination holds " + std::to_string(dst.size()) +
              " floats, tensor has " + std::to_string(numel()));
  convert_to_f32(dtype, data, numel(), dst.data());
}

void TensorView::check_view(bool fits, size_t align, const char* what) const {
  require(fits, ErrorCode::Format,
          file + ": tensor '" + name + "' is " + dtype_name(dtype) + "; the requested " + what +
              " does not fit it (to_f32() converts any dtype)");
  require(reinterpret_cast<uintptr_t>(data) % align == 0, ErrorCode::Format,
          file + ": tensor '" + name + "' data is not aligned for a zero-copy " + what +
              "; use to_f32()");
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  uint64_t header_len = 0;
  const json header = read_header(file_, path, &header_len);
  const uint8_t* data = file_.data() + 8 + header_len;
  const uint64_t data_size = file_.size() - 8 - header_len;
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      metadata_ = read_metadata(it.value(), path);
      continue;
    }
    uint64_t begin = 0;
    TensorView view = read_entry(it.key(), it.value(), path, data_size, &begin);
    view.data = data + begin;
    spans.push_back({begin, begin + view.nbytes, it.key()});
    tensors_.emplace(it.key(), std::move(view));
  }
  names_ = check_tiling(std::move(spans), data_size, path);
}

const TensorView& SafetensorsFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(ErrorCode::Format, path(), "missing tensor '" + name + "'");
  return it->second;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "model.safetensors.index.json")) {
      p /= "model.safetensors.index.json";
    } else if (fs::exists(p / "model.safetensors")) {
      p /= "model.safetensors";
    } else {
      throw Error(ErrorCode::Io, path +
                                     ": no model.safetensors or model.safetensors.index.json in "
                                     "this folder");
    }
  }
  SafetensorsCheckpoint ck;
  ck.path_ = p.string();
  const std::string fname = p.filename().string();
  const bool is_index = fname.size() > 5 && fname.ends_with(".json");
  if (!is_index) {
    ck.files_.push_back(std::make_unique<SafetensorsFile>(ck.path_));
    for (const auto& n : ck.files_[0]->names()) ck.where_[n] = ck.files_[0].get();
    return ck;
  }

  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, ck.path_ + ": cannot open");
  json index;
  try {
    index = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::Format, ck.path_ + ": not valid JSON: " + e.what());
  }
  auto wm = index.find("weight_map");
  if (!index.is_object() || wm == index.end() || !wm->is_object()) {
    throw Error(ErrorCode::Format, ck.path_ + ": missing object 'weight_map'");
  }
  std::map<std::string, const SafetensorsFile*> by_shard;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) {
      throw Error(ErrorCode::Format,
                  ck.path_ + ": weight_map entry for tensor '" + it.key() + "' is not a string");
    }
    const std::string shard = it.value().get<std::string>();
    const fs::path rel(shard);
    if (shard.empty() || rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](const fs::path& c) { return c == ".."; })) {
      throw Error(ErrorCode::Format, ck.path_ + ": tensor '" + it.key() + "': shard path '" +
                                         shard + "' must be relative and stay in the folder");
    }
    auto found = by_shard.find(shard);
    if (found == by_shard.end()) {
      ck.files_.push_back(std::make_unique<SafetensorsFile>((p.parent_path() / rel).string()));
      found = by_shard.emplace(shard, ck.files_.back().get()).first;
    }
    if (!found->second->contains(it.key())) {
      throw Error(ErrorCode::Format, ck.path_ + ": tensor '" + it.key() + "' is mapped to shard '" +
                                         shard + "' but that file does not contain it");
    }
    ck.where_[it.key()] = found->second;
  }
  return ck;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

const TensorView& SafetensorsCheckpoint::tensor(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    throw Error(ErrorCode::Format, path_ + ": missing tensor '" + name + "'");
  }
  return it->second->tensor(name);
}

}  // namespace attn::models
