// Errors that cross module boundaries: a code plus a message naming the offending thing.
// Library code never exits; it throws attn::Error and callers (CLI, GUI, tests) report it.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace attn {

enum class ErrorCode {
  InvalidArgument,  // bad shape, size, or combination of arguments
  UnknownVariant,   // registry has no variant with that id
  BadParameter,     // unknown parameter name, wrong type, or out of range
  NonFinite,        // NaN or Inf found in an input tensor
  Unsupported,      // a backend cannot run this variant / shape
  Io,               // file could not be read or written
  Format,           // file contents are malformed
  Device,           // GPU / Vulkan failure
  Cancelled,        // a cooperative cancellation was requested
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Throws Error(code, message) when `cond` is false.
inline void require(bool cond, ErrorCode code, const std::string& message) {
  if (!cond) throw Error(code, message);
}

// Messages about a name that is not known (a variant piece, a parameter, a verb, a model).
// The entry of `known` closest to `name` by edit distance (ignoring case; a swap of neighbours
// counts as one edit), or "" when none is close enough to be a likely misspelling of it.
std::string closest_name(const std::string& name, const std::vector<std::string>& known);
// ": did you mean X?" with X the closest_name(), or "" when there is none.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& known);
// "a, b, c".
std::string join_names(const std::vector<std::string>& names);

}  // namespace attn
