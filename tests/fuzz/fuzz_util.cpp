#include "tests/fuzz/fuzz_util.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace attn::fuzz {
namespace fs = std::filesystem;

namespace {

struct Scratch {
  std::string path;
  Scratch() {
    // Targets write a file per input: memory-backed /dev/shm unless TMPDIR says otherwise.
    const char* tmp = std::getenv("TMPDIR");
    std::string base = tmp && *tmp ? tmp : "/tmp";
    if (!(tmp && *tmp) && access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    std::string templ = base + "/attnscope-fuzz-XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    path = templ;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

const std::string& scratch_dir() {
  static Scratch scratch;
  return scratch.path;
}

std::string write_scratch(const std::string& name, std::span<const uint8_t> bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

std::string write_scratch(const std::string& name, std::string_view text) {
  return write_scratch(name, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

std::string source_dir() {
  return ATTN_SOURCE_DIR;
}

}  // namespace attn::fuzz
