#include "app/core/datasets/text_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "compute/error.h"

namespace attn::core {

namespace {

// Each non-blank line of a JSONL file as an object, with "file:line" for messages.
std::vector<std::pair<std::string, nlohmann::json>> jsonl_objects(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(bool(in), ErrorCode::Io, path + ": cannot open the dataset");
  std::vector<std::pair<std::string, nlohmann::json>> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorCode::Format, where + ": not a JSON line (" + e.what() + ")");
    }
    require(j.is_object(), ErrorCode::Format, where + ": a record must be a JSON object");
    out.emplace_back(where, std::move(j));
  }
  require(!out.empty(), ErrorCode::Format, path + ": the dataset holds no records");
  return out;
}

std::string field(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto t = j.find(key);
  require(t != j.end() && t->is_string(), ErrorCode::Format,
          where + ": the record has no string \"" + key + "\"");
  return t->get<std::string>();
}

}  // namespace

std::vector<PatchRecordText> read_patch_dataset(const std::string& path) {
  std::vector<PatchRecordText> out;
  for (const auto& [where, j] : jsonl_objects(path))
    out.push_back({where, field(j, "clean", where), field(j, "corrupt", where),
                   field(j, "target", where), field(j, "foil", where)});
  return out;
}

std::vector<TextRecord> read_text_dataset(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<TextRecord> out;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
    require(!ec, ErrorCode::Io, path + ": cannot list the folder (" + ec.message() + ")");
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      require(bool(in), ErrorCode::Io, f.string() + ": cannot open");
      out.push_back({f.string(), std::string(std::istreambuf_iterator<char>(in), {})});
    }
    require(!out.empty(), ErrorCode::Format, path + ": the folder holds no .txt files");
    return out;
  }
  for (const auto& [where, j] : jsonl_objects(path))
    out.push_back({where, field(j, "text", where)});
  require(!out.empty(), ErrorCode::Format, path + ": the dataset holds no records");
  return out;
}

}  // namespace attn::core
