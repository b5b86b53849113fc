// The clients (app/cli, app/gui) reach models/ through the analysis core only: no file of theirs
// includes a models/ header or names the attn::models namespace; the core's
// app/core/session/model_catalog.h names what they need.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/app/image_compare.h"

namespace attn {
namespace {

namespace fs = std::filesystem;

// "path:line: text" for every line of a .h/.cpp file under `folder` (relative to the source
// tree) that includes a models/ header or names models:: (outside // comments).
std::vector<std::string> models_uses(const std::string& folder, size_t* files = nullptr) {
  std::vector<std::string> out;
  const fs::path root(ATTN_TEST_SOURCE_DIR);
  size_t n = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    ++n;
    std::istringstream text(test::read_all(entry.path().string()));
    std::string line;
    for (int number = 1; std::getline(text, line); ++number) {
      const std::string code = line.substr(0, line.find("//"));
      if (code.find("#include \"models/") != std::string::npos ||
          code.find("models::") != std::string::npos)
        out.push_back(fs::relative(entry.path(), root).string() + ":" + std::to_string(number) +
                      ": " + line);
    }
  }
  if (files) *files = n;
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

TEST(ClientLayers, CliUsesTheCoreNotModels) {
  size_t files = 0;
  const auto uses = models_uses("app/cli", &files);
  EXPECT_GT(files, 10u);
  EXPECT_TRUE(uses.empty()) << "use app/core/session/model_catalog.h instead:\n" << joined(uses);
}

TEST(ClientLayers, GuiUsesTheCoreNotModels) {
  size_t files = 0;
  const auto uses = models_uses("app/gui", &files);
  EXPECT_GT(files, 10u);
  EXPECT_TRUE(uses.empty()) << "use app/core/session/model_catalog.h instead:\n" << joined(uses);
}

// The scan finds what it looks for: the core itself includes models/ headers.
TEST(ClientLayers, TheScanSeesModelsIncludes) {
  EXPECT_FALSE(models_uses("app/core").empty());
}

}  // namespace
}  // namespace attn
