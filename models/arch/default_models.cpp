#include "models/arch/default_models.h"

#include <cstdlib>
#include <filesystem>

#include "compute/error.h"

#ifndef ATTN_SOURCE_DIR
#define ATTN_SOURCE_DIR ""
#endif

namespace attn::models {
namespace fs = std::filesystem;

const std::vector<std::string>& default_model_names() {
  static const std::vector<std::string> names = {"default-text", "teaching-text", "default-vision"};
  return names;
}

bool is_default_model_name(const std::string& name) {
  for (const std::string& n : default_model_names())
    if (name == n) return true;
  return false;
}

std::string missing_model_message(const std::string& name) {
  return "model '" + name + "' is neither a model folder nor an embedded model" +
         did_you_mean(name, default_model_names()) +
         " (embedded models: " + join_names(default_model_names()) + ")";
}

std::string resolve_model_dir(const std::string& name) {
  if (!is_default_model_name(name)) return name;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("ATTNSCOPE_MODELS"); env && *env) {
    candidates.push_back(fs::path(env) / name);
  }
  // ATTNSCOPE_NO_SOURCE_TREE=1 ignores the source tree's copy (tests of an installed package).
  const char* no_tree = std::getenv("ATTNSCOPE_NO_SOURCE_TREE");
  if (std::string(ATTN_SOURCE_DIR) != "" && !(no_tree && *no_tree && std::string(no_tree) != "0")) {
    candidates.push_back(fs::path(ATTN_SOURCE_DIR) / "assets" / "models" / name);
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // <prefix>/bin/attnscope -> <prefix>/share/attnscope/models/<name>
    candidates.push_back(exe.parent_path().parent_path() / "share" / "attnscope" / "models" / name);
  }
  std::string looked;
  for (const fs::path& c : candidates) {
    if (fs::exists(c / "config.json", ec)) return c.string();
    looked += "\n  " + c.string();
  }
  throw Error(ErrorCode::Io, "the embedded model '" + name + "' was not found; looked in:" +
                                 looked + "\nTrain it with models/train/train_" +
                                 (name == "default-vision" ? "vision" : "text") +
                                 ".py, set ATTNSCOPE_MODELS, or pass --model DIR");
}

}  // namespace attn::models
