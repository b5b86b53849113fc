#include "models/arch/weights.h"

#include <filesystem>

#include "compute/cpu/huge_pages.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/model.h"

namespace attn::models {
namespace fs = std::filesystem;

namespace {

std::string open_path(const std::string& dir) {
  const fs::path d(dir);
  for (const char* f : {"model.safetensors.index.json", "model.safetensors"}) {
    if (fs::exists(d / f)) return (d / f).string();
  }
  std::string found;
  for (const char* f : {"pytorch_model.bin", "model.pt", "tf_model.h5", "flax_model.msgpack"}) {
    if (fs::exists(d / f)) found = f;
  }
  throw Error(ErrorCode::Io,
              dir + ": no model.safetensors or model.safetensors.index.json" +
                  (found.empty() ? std::string()
                                 : " (found " + found +
                                       "; only safetensors checkpoints are read: re-save "
                                       "with save_pretrained(..., safe_serialization=True))"));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

WeightStore::WeightStore(const std::string& dir)
    : ckpt_(SafetensorsCheckpoint::open(open_path(dir))) {}

std::string WeightStore::resolve(const std::string& name) const {
  std::vector<std::string> spellings = {name};
  // Checkpoints converted from old TF BERT keep LayerNorm.gamma / LayerNorm.beta.
  if (ends_with(name, "LayerNorm.weight")) {
    spellings.push_back(name.substr(0, name.size() - 6) + "gamma");
  } else if (ends_with(name, "LayerNorm.bias")) {
    spellings.push_back(name.substr(0, name.size() - 4) + "beta");
  }
  for (const std::string& p : prefixes_) {
    for (const std::string& s : spellings) {
      if (ckpt_.contains(p + s)) return p + s;
    }
  }
  for (const std::string& s : spellings) {
    if (ckpt_.contains(s)) return s;
  }
  return "";
}

const TensorView* WeightStore::find(const std::string& name, const std::vector<int64_t>& shape,
                                    const std::string& what) const {
  const std::string stored = resolve(name);
  if (stored.empty()) return nullptr;
  const TensorView& t = ckpt_.tensor(stored);
  if (t.shape != shape) {
    throw Error(ErrorCode::Format, t.file + ": tensor '" + stored + "' has shape " +
                                       shape_string(t.shape) + " but the config implies " +
                                       shape_string(shape) +
                                       (what.empty() ? std::string() : " (" + what + ")"));
  }
  if (!dtype_is_float(t.dtype)) {
    throw Error(ErrorCode::Format, t.file + ": tensor '" + stored + "' has dtype " +
                                       dtype_name(t.dtype) +
                                       ", expected a floating-point type (F32, BF16, F16 or F64)");
  }
  return &t;
}

const float* WeightStore::convert(const TensorView& t) const {
  // The copy is not zero-filled first (every element is written), asks for huge pages (faulting
  // in 4 KiB pages costs more than converting on some hosts) and converts in slices on every
  // core.
  const size_t n = t.numel();
  converted_.emplace_back(new float[n ? n : 1]);
  float* dst = converted_.back().get();
  cpu::advise_huge_pages(dst, n * sizeof(float));
  constexpr size_t kSlice = size_t(1) << 20;
  const size_t es = dtype_size(t.dtype);
  const auto* src = static_cast<const unsigned char*>(t.data);
  parallel_for(int((n + kSlice - 1) / kSlice), [&](int s) {
    const size_t a = size_t(s) * kSlice, c = std::min(n, a + kSlice);
    convert_to_f32(t.dtype, src + a * es, c - a, dst + a);
  });
  converted_bytes_ += n * sizeof(float);
  return dst;
}

const float* WeightStore::get_optional(const std::string& name, const std::vector<int64_t>& shape,
                                       const std::string& what) const {
  const TensorView* t = find(name, shape, what);
  return t ? as_f32(*t) : nullptr;
}

const float* WeightStore::as_f32(const TensorView& t) const {
  if (t.dtype == DType::F32 && reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0) {
    mapped_bytes_ += t.numel() * 4;
    return t.f32().data();  // in place, inside the memory map
  }
  return convert(t);
}

Matrix WeightStore::get_matrix_optional(const std::string& name, const std::vector<int64_t>& shape,
                                        const std::string& what) const {
  const TensorView* t = find(name, shape, what);
  if (!t) return {};
  const auto addr = reinterpret_cast<uintptr_t>(t->data);
  Matrix m{nullptr, cpu::ElemType::F32};
  if ((t->dtype == DType::BF16 || t->dtype == DType::F16) && addr % 2 == 0) {
    mapped_bytes_ += t->numel() * 2;
    m = {t->data, t->dtype == DType::BF16 ? cpu::ElemType::Bf16 : cpu::ElemType::F16};
  } else {
    m.data = as_f32(*t);
  }
  matrix_types_ |= 1u << unsigned(m.type);
  return m;
}

std::string WeightStore::matrix_dtype() const {
  switch (matrix_types_) {
    case 0:
    case 1u << unsigned(cpu::ElemType::F32):
      return "f32";
    case 1u << unsigned(cpu::ElemType::Bf16):
      return "bf16";
    case 1u << unsigned(cpu::ElemType::F16):
      return "f16";
    default:
      return "mixed";
  }
}

void WeightStore::describe(ModelInfo& info) const {
  info.weight_dtype = matrix_dtype();
  info.weight_bytes_mapped = mapped_bytes_;
  info.weight_bytes_converted = converted_bytes_;
}

Matrix WeightStore::get_matrix(const std::string& name, const std::vector<int64_t>& shape,
                               const std::string& what) const {
  const Matrix m = get_matrix_optional(name, shape, what);
  if (!m) missing(name, what);
  return m;
}

void WeightStore::missing(const std::string& name, const std::string& what) const {
  std::string tried;
  for (const std::string& pre : prefixes_) tried += "'" + pre + name + "', ";
  throw Error(ErrorCode::Format, ckpt_.path() + ": missing tensor " +
                                     (tried.empty() ? "" : tried + "or ") + "'" + name + "'" +
                                     (what.empty() ? std::string() : " (" + what + ")"));
}

std::vector<int64_t> WeightStore::shape_of(const std::string& name) const {
  const std::string stored = resolve(name);
  return stored.empty() ? std::vector<int64_t>{} : ckpt_.tensor(stored).shape;
}

const float* WeightStore::get(const std::string& name, const std::vector<int64_t>& shape,
                              const std::string& what) const {
  const float* p = get_optional(name, shape, what);
  if (!p) missing(name, what);
  return p;
}

}  // namespace attn::models
