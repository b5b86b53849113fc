#include "models/formats/npy.h"

#include <zip.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>

#include "compute/error.h"
#include "models/formats/limits.h"
#include "models/formats/mapped_file.h"

namespace attn::models {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // NumPy pads headers so the data starts 64-byte aligned

[[noreturn]] void fail(ErrorCode code, const std::string& name, const std::string& what) {
  throw Error(code, name + ": " + what);
}

// One value of the header's Python dict literal.
struct PyValue {
  enum Kind { String, Bool, Tuple, Int, Other } kind = Other;
  std::string str;
  bool boolean = false;
  std::vector<int64_t> ints;  // tuple entries, or the single int
};

// Parses the subset of Python literal syntax that NumPy writes in .npy headers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  std::map<std::string, PyValue> parse_dict() {
    std::map<std::string, PyValue> out;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      std::string key = parse_string();
      expect(':');
      out[key] = parse_value();
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}');
      break;
    }
    return out;
  }

 private:
  char peek() {
    skip_ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  [[noreturn]] void bad(const std::string& what) {
    fail(ErrorCode::Format, name_,
         "malformed header (" + what + " at column " + std::to_string(i_) +
             "): " + std::string(s_.substr(0, 200)) + (s_.size() > 200 ? "..." : ""));
  }
  std::string parse_string() {
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;
      out += s_[i_++];
    }
    if (i_ >= s_.size()) bad("unterminated string");
    ++i_;
    return out;
  }
  int64_t parse_int() {
    skip_ws();
    size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (start == i_) bad("expected a non-negative integer");
    int64_t v = 0;
    for (size_t k = start; k < i_; ++k) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[k] - '0', &v)) {
        bad("integer overflows");
      }
    }
    if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;  // Python 2 long suffix
    return v;
  }
  PyValue parse_value() {
    PyValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = PyValue::String;
      v.str = parse_string();
    } else if (s_.substr(i_, 4) == "True") {
      v.kind = PyValue::Bool;
      v.boolean = true;
      i_ += 4;
    } else if (s_.substr(i_, 5) == "False") {
      v.kind = PyValue::Bool;
      i_ += 5;
    } else if (c == '(') {
      v.kind = PyValue::Tuple;
      ++i_;
      while (peek() != ')') {
        v.ints.push_back(parse_int());
        if (peek() == ',') {
          ++i_;
        } else if (peek() != ')') {
          bad("expected ',' or ')' in shape");
        }
      }
      ++i_;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      v.kind = PyValue::Int;
      v.ints.push_back(parse_int());
    } else if (c == '[') {
      // Structured dtypes: skip the nested list; the caller reports them as unsupported.
      int depth = 0;
      do {
        if (s_[i_] == '[') ++depth;
        if (s_[i_] == ']') --depth;
        ++i_;
      } while (depth > 0 && i_ < s_.size());
      v.kind = PyValue::Other;
    } else {
      bad("unexpected value");
    }
    return v;
  }

  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
};

struct DescrInfo {
  DType dtype;
  bool big_endian;
};

std::optional<DescrInfo> parse_descr(const std::string& d) {
  if (d.size() < 3) return std::nullopt;
  const char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return std::nullopt;
  DType dt;
  if (!dtype_from_numpy_code(std::string_view(d).substr(1), &dt)) return std::nullopt;
  if (order == '|' && dtype_size(dt) != 1) return std::nullopt;
  return DescrInfo{dt, order == '>'};
}

std::string shape_repr(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

size_t NpyArray::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::vector<float> NpyArray::to_f32() const {
  std::vector<float> out(numel());
  convert_to_f32(dtype, data.data(), out.size(), out.data());
  return out;
}

NpyArray NpyArray::from_f32(std::vector<int64_t> shape, std::span<const float> values) {
  NpyArray a;
  a.dtype = DType::F32;
  a.shape = std::move(shape);
  require(a.numel() == values.size(), ErrorCode::InvalidArgument,
          "NpyArray::from_f32: shape " + shape_repr(a.shape) + " holds " +
              std::to_string(a.numel()) + " values, " + std::to_string(values.size()) + " given");
  a.data.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

std::string npy_descr(DType dtype) {
  const char* code = dtype_numpy_code(dtype);
  if (!code)
    throw Error(ErrorCode::Unsupported, std::string("NumPy has no dtype for ") + dtype_name(dtype));
  return (dtype_size(dtype) == 1 ? "|" : "<") + std::string(code);
}

NpyArray parse_npy(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < kMagicLen + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    fail(ErrorCode::Format, name, "not a .npy file (missing \\x93NUMPY magic)");
  }
  const int major = bytes[6];
  const int minor = bytes[7];
  size_t header_len = 0;
  size_t prefix = 0;
  if (major == 1) {
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(ErrorCode::Format, name, "truncated header");
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8 | size_t(bytes[10]) << 16 |
                 size_t(bytes[11]) << 24;
    prefix = 12;
  } else {
    fail(ErrorCode::Format, name,
         "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  if (header_len > bytes.size() - prefix) {
    fail(ErrorCode::Format, name,
         "header length " + std::to_string(header_len) + " runs past the end of the file (" +
             std::to_string(bytes.size()) + " bytes)");
  }
  if (header_len > kMaxNpyHeaderBytes) {
    fail(ErrorCode::Format, name,
         "header length " + std::to_string(header_len) + " exceeds the limit of " +
             std::to_string(kMaxNpyHeaderBytes) + " bytes (kMaxNpyHeaderBytes)");
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + prefix), header_len);
  auto dict = HeaderParser(header, name).parse_dict();
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (!dict.count(key)) fail(ErrorCode::Format, name, std::string("header lacks '") + key + "'");
  }
  const PyValue& descr = dict["descr"];
  if (descr.kind != PyValue::String) {
    fail(ErrorCode::Unsupported, name, "structured dtypes are not supported");
  }
  auto info = parse_descr(descr.str);
  if (!info) {
    fail(ErrorCode::Unsupported, name,
         "dtype '" + descr.str +
             "' is not supported (use <f4, <f2, <f8, <i4, <i8, <i2, |i1, |u1 or |b1)");
  }
  if (dict["fortran_order"].kind != PyValue::Bool) {
    fail(ErrorCode::Format, name, "'fortran_order' must be True or False");
  }
  if (dict["fortran_order"].boolean) {
    fail(ErrorCode::Unsupported, name,
         "fortran_order True is not supported; re-save with np.save(path, "
         "np.ascontiguousarray(a))");
  }
  if (dict["shape"].kind != PyValue::Tuple)
    fail(ErrorCode::Format, name, "'shape' must be a tuple");

  NpyArray a;
  a.dtype = info->dtype;
  a.shape = dict["shape"].ints;
  uint64_t numel = 1;
  for (int64_t d : a.shape) {
    if (__builtin_mul_overflow(numel, uint64_t(d), &numel)) {
      fail(ErrorCode::Format, name, "shape " + shape_repr(a.shape) + " overflows");
    }
  }
  const size_t esize = dtype_size(a.dtype);
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, uint64_t(esize), &nbytes) || nbytes > kMaxTensorBytes) {
    fail(ErrorCode::Format, name,
         "shape " + shape_repr(a.shape) + " of " + descr.str + " needs " +
             (nbytes ? std::to_string(nbytes) : std::string("more than 2^64")) +
             " bytes, over the limit of " + std::to_string(kMaxTensorBytes) +
             " bytes per tensor (kMaxTensorBytes)");
  }
  const size_t available = bytes.size() - prefix - header_len;
  if (numel > available / esize) {
    fail(ErrorCode::Format, name,
         "truncated: shape " + shape_repr(a.shape) + " of " + descr.str + " needs " +
             std::to_string(numel * esize) + " bytes, file has " + std::to_string(available));
  }
  const uint8_t* src = bytes.data() + prefix + header_len;
  a.data.assign(src, src + numel * esize);
  if (info->big_endian && esize > 1) {
    for (size_t i = 0; i < a.data.size(); i += esize) {
      std::reverse(a.data.begin() + i, a.data.begin() + i + esize);
    }
  }
  return a;
}

NpyArray read_npy(const std::string& path) {
  // Mapped, not read: the header is checked against the file's size before any array byte is
  // copied, and the array is copied once.
  const MappedFile file(path);
  if (file.size() > kMaxTensorBytes + kMaxNpyHeaderBytes) {
    fail(ErrorCode::Format, path,
         "file has " + std::to_string(file.size()) + " bytes, over the limit of " +
             std::to_string(kMaxTensorBytes) + " bytes per tensor (kMaxTensorBytes)");
  }
  return parse_npy({file.data(), file.size()}, path);
}

std::vector<uint8_t> serialize_npy(const NpyArray& array) {
  require(array.data.size() == array.numel() * dtype_size(array.dtype), ErrorCode::InvalidArgument,
          "serialize_npy: " + std::to_string(array.data.size()) + " bytes do not match shape " +
              shape_repr(array.shape));
  std::string header = "{'descr': '" + npy_descr(array.dtype) +
                       "', 'fortran_order': False, 'shape': " + shape_repr(array.shape) + ", }";
  size_t prefix = 10;
  if (header.size() + 1 + (kAlign - 1) + prefix > 65535) prefix = 12;  // version 2.0
  const size_t padded = header.size() + 1;
  const size_t pad = (kAlign - (prefix + padded) % kAlign) % kAlign;
  header.append(pad, ' ');
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + kMagicLen);
  out.push_back(prefix == 10 ? 1 : 2);
  out.push_back(0);
  const size_t hl = header.size();
  out.push_back(uint8_t(hl));
  out.push_back(uint8_t(hl >> 8));
  if (prefix == 12) {
    out.push_back(uint8_t(hl >> 16));
    out.push_back(uint8_t(hl >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), array.data.begin(), array.data.end());
  return out;
}

void write_npy(const std::string& path, const NpyArray& array) {
  const auto bytes = serialize_npy(array);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(ErrorCode::Io, path, "cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  out.close();
  if (!out) fail(ErrorCode::Io, path, "write failed");
}

namespace {
struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
std::string zip_message(int code) {
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string msg = zip_error_strerror(&err);
  zip_error_fini(&err);
  return msg;
}
}  // namespace

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  int code = 0;
  std::unique_ptr<zip_t, ZipCloser> archive(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (!archive) {
    const bool io = code == ZIP_ER_OPEN || code == ZIP_ER_NOENT || code == ZIP_ER_READ;
    fail(io ? ErrorCode::Io : ErrorCode::Format, path, "cannot open as .npz: " + zip_message(code));
  }
  std::error_code ec;
  const uint64_t archive_size = std::filesystem::file_size(path, ec);
  if (ec) fail(ErrorCode::Io, path, "cannot read its size: " + ec.message());
  std::map<std::string, NpyArray> out;
  const zip_int64_t n = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(archive.get(), zip_uint64_t(i), 0, &st) != 0) {
      fail(ErrorCode::Format, path,
           std::string("entry ") + std::to_string(i) + ": " + zip_strerror(archive.get()));
    }
    std::string entry = st.name;
    if (!entry.empty() && entry.back() == '/') continue;  // a folder entry
    const std::string where = path + ": entry '" + entry + "'";
    std::unique_ptr<zip_file_t, ZipFileCloser> file(
        zip_fopen_index(archive.get(), zip_uint64_t(i), 0));
    // The sizes come from the archive's directory and may lie: check them against the limit
    // and the archive's size, then grow the buffer only as bytes actually arrive.
    const bool sized = (st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE);
    if (!sized) fail(ErrorCode::Format, where, "the archive does not record the entry's size");
    if (st.size > kMaxTensorBytes + kMaxNpyHeaderBytes) {
      fail(ErrorCode::Format, where,
           "uncompressed size " + std::to_string(st.size) + " bytes is over the limit of " +
               std::to_string(kMaxTensorBytes) + " bytes per tensor (kMaxTensorBytes)");
    }
    if (st.comp_size > archive_size) {
      fail(ErrorCode::Format, where,
           "compressed size " + std::to_string(st.comp_size) + " bytes runs past the end of the " +
               std::to_string(archive_size) + "-byte archive");
    }
    const bool stored = (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE;
    // Deflate expands at most 1032:1.
    const uint64_t most = stored ? st.comp_size : st.comp_size * 1032 + 1024;
    if (st.size > most) {
      fail(ErrorCode::Format, where,
           "claims " + std::to_string(st.size) + " bytes uncompressed from " +
               std::to_string(st.comp_size) + " bytes " + (stored ? "stored" : "compressed") +
               "; at most " + std::to_string(most) + " are possible (corrupt archive?)");
    }
    if (!file) fail(ErrorCode::Format, where, zip_strerror(archive.get()));
    std::vector<uint8_t> bytes;
    constexpr uint64_t kChunk = uint64_t(1) << 20;
    while (bytes.size() < st.size) {
      const size_t at = bytes.size();
      const uint64_t want = std::min<uint64_t>(kChunk, st.size - at);
      bytes.resize(at + want);
      const zip_int64_t r = zip_fread(file.get(), bytes.data() + at, want);
      if (r < 0) fail(ErrorCode::Format, where, zip_file_strerror(file.get()));
      bytes.resize(at + size_t(r));
      if (r == 0) break;
    }
    if (bytes.size() != st.size) {
      fail(ErrorCode::Format, where,
           "truncated entry: " + std::to_string(bytes.size()) + " of " + std::to_string(st.size) +
               " bytes");
    }
    std::string key = entry;
    if (key.size() > 4 && key.ends_with(".npy")) key.resize(key.size() - 4);
    out[key] = parse_npy(bytes, where);
  }
  return out;
}

void write_npz(const std::string& path, const std::map<std::string, NpyArray>& arrays,
               bool compress) {
  int code = 0;
  std::unique_ptr<zip_t, ZipCloser> archive(
      zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  if (!archive) fail(ErrorCode::Io, path, "cannot create: " + zip_message(code));
  // Buffers must outlive zip_close, which is when libzip reads them.
  std::vector<std::vector<uint8_t>> buffers;
  buffers.reserve(arrays.size());
  for (const auto& [name, array] : arrays) {
    buffers.push_back(serialize_npy(array));
    zip_source_t* src =
        zip_source_buffer(archive.get(), buffers.back().data(), buffers.back().size(), 0);
    if (!src) fail(ErrorCode::Io, path, zip_strerror(archive.get()));
    const zip_int64_t idx = zip_file_add(archive.get(), (name + ".npy").c_str(), src,
                                         ZIP_FL_ENC_UTF_8 | ZIP_FL_OVERWRITE);
    if (idx < 0) {
      zip_source_free(src);
      fail(ErrorCode::Io, path, "entry '" + name + "': " + zip_strerror(archive.get()));
    }
    zip_set_file_compression(archive.get(), zip_uint64_t(idx),
                             compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(archive.get()) != 0) fail(ErrorCode::Io, path, zip_strerror(archive.get()));
  archive.release();  // zip_close freed it
}

}  // namespace attn::models
