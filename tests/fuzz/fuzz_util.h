// Helpers shared by the libFuzzer targets in this folder: a scratch folder per process for the
// loaders that read paths, and the rule every target checks — a loader given any bytes returns
// or throws attn::Error; anything else (another exception, a crash, a sanitizer report, an
// allocation over libFuzzer's limit, a broken round trip) is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "compute/error.h"

namespace attn::fuzz {

// A folder private to this process (under $TMPDIR, else /dev/shm, else /tmp), created on first
// use and removed when the process exits normally.
const std::string& scratch_dir();
// Writes `bytes` to scratch_dir()/`name` (replacing it) and returns the path.
std::string write_scratch(const std::string& name, std::span<const uint8_t> bytes);
std::string write_scratch(const std::string& name, std::string_view text);
// The source tree (fixtures that targets copy at start-up).
std::string source_dir();

// Runs `f`; attn::Error is a loader's documented way to refuse input and is swallowed. Any other
// exception escapes, and libFuzzer reports it as a crash.
template <typename F>
void refuse_only_with_attn_error(F&& f) {
  try {
    f();
  } catch (const attn::Error&) {
  }
}

// A property the loader documents does not hold: prints `what` and aborts (a finding).
[[noreturn]] inline void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz property broken: %s\n", what.c_str());
  std::abort();
}
inline void check(bool cond, const std::string& what) {
  if (!cond) broken(what);
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace attn::fuzz
