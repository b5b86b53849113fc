// JSON files of the CLI verbs: shard files read back for --merge, and --json outputs written.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "app/cli/options.h"
#include "compute/error.h"

namespace attn::cli {

// Throws Error(Io) for a file that cannot be opened and Error(Format), naming it, for one that
// is not JSON.
inline nlohmann::json read_shard_json(const std::string& path) {
  std::ifstream in(path);
  require(bool(in), ErrorCode::Io, path + ": cannot open shard file");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::Format, path + ": not JSON: " + e.what());
  }
}

// Throws Error(Io) when the file cannot be written.
// "-" is stdout (options.h).
inline void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_json_output(path, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace attn::cli
