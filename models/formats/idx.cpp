#include "models/formats/idx.h"

#include <zlib.h>

#include <cstdio>
#include <memory>

#include "compute/error.h"
#include "models/formats/limits.h"

namespace attn::models {

namespace {

// Bytes of a plain or gzip file, read through zlib (which passes plain files through).
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    require(f_ != nullptr, ErrorCode::Io, path + ": cannot open");
    gzbuffer(f_, 1 << 17);
  }
  ~Reader() {
    if (f_) gzclose(f_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Up to n bytes into out; returns how many (fewer only at the end of the data).
  size_t read(uint8_t* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      const unsigned ask = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
      const int r = gzread(f_, out + got, ask);
      if (r < 0) {
        int code = 0;
        const char* msg = gzerror(f_, &code);
        throw Error(ErrorCode::Format, path_ + ": not a valid gzip stream (" +
                                           std::string(msg ? msg : "zlib error") + ")");
      }
      if (r == 0) break;
      got += size_t(r);
    }
    return got;
  }

 private:
  std::string path_;
  gzFile f_;
};

}  // namespace

IdxArray read_idx(const std::string& path) {
  Reader in(path);
  uint8_t head[4];
  const auto bad = [&](const std::string& why) {
    throw Error(ErrorCode::Format, path + ": " + why);
  };
  if (in.read(head, 4) != 4) bad("too short for an IDX header");
  if (head[0] != 0 || head[1] != 0) bad("not an IDX file (the first two bytes must be zero)");
  if (head[2] != 0x08)
    bad("IDX element type 0x" + std::string(1, "0123456789abcdef"[head[2] >> 4]) +
        std::string(1, "0123456789abcdef"[head[2] & 15]) +
        " is not supported (only unsigned bytes, 0x08)");
  const int ndim = head[3];
  if (ndim < 1 || ndim > 4) bad(std::to_string(ndim) + " dimensions: an IDX array here has 1 to 4");
  IdxArray a;
  uint64_t count = 1;
  for (int k = 0; k < ndim; ++k) {
    uint8_t b[4];
    if (in.read(b, 4) != 4) bad("the header ends inside its dimensions");
    const uint64_t dim =
        (uint64_t(b[0]) << 24) | (uint64_t(b[1]) << 16) | (uint64_t(b[2]) << 8) | b[3];
    if (dim == 0) bad("dimension " + std::to_string(k) + " is zero");
    count *= dim;  // at most 2^32 per factor, checked below before the next can overflow
    if (count > kMaxTensorBytes)
      bad("more than " + std::to_string(kMaxTensorBytes) + " elements (the tensor size limit)");
    a.shape.push_back(int64_t(dim));
  }
  // Grown as bytes arrive, so a header that promises more than the file holds allocates only
  // what was really there.
  constexpr size_t kStep = size_t(1) << 22;
  while (a.data.size() < count) {
    const size_t at = a.data.size(), want = std::min<size_t>(kStep, size_t(count) - at);
    a.data.resize(at + want);
    const size_t got = in.read(a.data.data() + at, want);
    if (got < want)
      bad("truncated: the header promises " + std::to_string(count) +
          " bytes of data, the file holds " + std::to_string(at + got));
  }
  uint8_t extra;
  if (in.read(&extra, 1) != 0)
    bad("bytes after the " + std::to_string(count) + " the header promises");
  return a;
}

}  // namespace attn::models
