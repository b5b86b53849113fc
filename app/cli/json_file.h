// JSON files of the CLI verbs: shard files read back for --merge, and --json outputs written.
#pragma once
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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
inline void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  require(bool(f), ErrorCode::Io, path + ": cannot write");
  f << j.dump(1) << "\n";
  require(bool(f), ErrorCode::Io, path + ": write failed");
}

}  // namespace attn::cli
