// SHA-256 file hashes that make a session reproducible, through OpenSSL's EVP digests.
#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>
#include <string>

#include "app/core/session/session.h"
#include "compute/error.h"

namespace attn::core {
namespace {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    require(ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1,
            ErrorCode::Unsupported, "SHA-256: OpenSSL digest unavailable");
  }
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) out += {digits[md[i] >> 4], digits[md[i] & 15]};
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  Sha256 s;
  s.update(bytes.data(), bytes.size());
  return s.hex();
}

std::string sha256_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open file to hash");
  Sha256 s;
  std::array<char, 1 << 16> buf;
  while (f) {
    f.read(buf.data(), std::streamsize(buf.size()));
    s.update(buf.data(), size_t(f.gcount()));
  }
  require(f.eof(), ErrorCode::Io, path + ": read failed while hashing");
  return s.hex();
}

}  // namespace attn::core
