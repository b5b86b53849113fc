// The one rule for attnscope's exit codes, applied in main.cpp: 0 ok; 2 a usage error, the
// command line itself is wrong (no input or conflicting options, a malformed spec, an unknown
// variant, parameter, verb or backend, a layer or head the model does not have, a text model
// given an image or the reverse); 1 a runtime failure (a missing or corrupt file, I/O, the
// device). A verb checks its command line before it does any work and throws UsageError for
// what is wrong with it; any other exception is a runtime failure, whatever its ErrorCode
// (library code throws InvalidArgument for bad file contents too, so the code cannot decide).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "compute/error.h"

namespace attn::cli {

enum ExitCode : int { kExitOk = 0, kExitRuntime = 1, kExitUsage = 2 };

// The exit codes as `attnscope --help` prints them below the verbs.
extern const char* const kExitCodesHelp;

// A mistake in the command line: reported on one line and exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message, ErrorCode code = ErrorCode::InvalidArgument)
      : Error(code, message) {}
};

// Throws UsageError(message) when `cond` is false.
inline void usage(bool cond, const std::string& message) {
  if (!cond) throw UsageError(message);
}

// Every spec parses and names known pieces with known parameters in range; otherwise a
// UsageError "<option>: <why>" (e.g. "did you mean window?").
void check_variant_specs(const std::vector<std::string>& specs, const std::string& option);

// Every spec names a KV-cache policy make_kv_policy() accepts; otherwise a UsageError
// "<option>: <why>".
void check_kv_policies(const std::vector<std::string>& specs, const std::string& option);

// A backend make_backend() knows; otherwise a UsageError naming them.
void check_backend(const std::string& name);

// An output figure path given to `option` (empty: none): a known extension and a writable
// folder; otherwise a UsageError "<option>: <why>" with the figure check's code.
void check_figure_option(const std::string& path, const std::string& option = "--figure");

// The whole of a text file (UTF-8 checked later, by the encoder); Error(Io) naming it when it
// cannot be opened.
std::string read_text_file(const std::string& path);

// A model the loader can look for: an embedded model's name or an existing path. Otherwise
// throws Error(Io, missing_model_message()): a missing folder is a runtime failure (exit 1).
void check_model_path(const std::string& name, const std::string& path);

// When the first word of the command line is not a verb of `app`: "unknown command 'x': did
// you mean y? (commands: ...)"; otherwise "".
std::string unknown_command(const CLI::App& app, int argc, const char* const* argv);
// After a parse that left arguments over: "unknown option '--modle' of analyze: did you mean
// --model?" for the first left-over option of the verb that ran, or "" when none is an option.
std::string unknown_option(const CLI::App& app);

}  // namespace attn::cli
