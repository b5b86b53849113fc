#include "test_util.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace attn::test {

std::filesystem::path work_dir() {
  // ATTN_TEST_WORK_DIR in the environment moves it (e.g. to try a fresh, offline run).
  const char* env = std::getenv("ATTN_TEST_WORK_DIR");
  std::filesystem::path p(env && *env ? env : ATTN_TEST_WORK_DIR);
  std::filesystem::create_directories(p);
  return p;
}

std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "misc";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  auto p = work_dir() / "scratch" / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(bool(out)) << path;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

int run_command(const std::string& command) {
  const int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

bool python_has(const std::string& modules) {
  std::string imports;
  std::string m;
  for (char c : modules + " ") {
    if (c == ' ') {
      if (!m.empty()) imports += "import " + m + ";";
      m.clear();
    } else {
      m += c;
    }
  }
  return run_command("/usr/bin/python3 -c '" + imports + "' >/dev/null 2>&1") == 0;
}

std::filesystem::path fetched(const std::string& group, std::string* why) {
  const auto dest = work_dir() / "vocab";
  const auto log = work_dir() / ("fetch-" + group + ".log");
  const std::string cmd = "bash '" + std::string(ATTN_TEST_SOURCE_DIR) +
                          "/fetch_vocabularies.sh' '" + dest.string() + "' '" + group + "' >'" +
                          log.string() + "' 2>&1";
  if (run_command(cmd) != 0 || !std::filesystem::exists(dest / group / ".done")) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    *why = text.empty() ? "fetch failed" : text;
    return {};
  }
  return dest / group;
}

std::vector<std::vector<int32_t>> reference_ids(const std::string& kind,
                                                const std::vector<std::string>& texts,
                                                std::string* why) {
  if (run_command("node --version >/dev/null 2>&1") != 0) {
    *why = "node is not installed";
    return {};
  }
  const auto dir = scratch_dir();
  write_text(dir / "in.json", nlohmann::json(texts).dump());
  const std::string cmd = "node '" + std::string(ATTN_TEST_SOURCE_DIR) + "/tokenizer_oracle.js' " +
                          kind + " '" + (work_dir() / "vocab").string() + "' '" +
                          (dir / "in.json").string() + "' '" + (dir / "out.json").string() +
                          "' 2>'" + (dir / "err.txt").string() + "'";
  if (run_command(cmd) != 0) {
    std::ifstream in(dir / "err.txt");
    *why = "reference encoder failed: " + std::string((std::istreambuf_iterator<char>(in)), {});
    return {};
  }
  std::ifstream in(dir / "out.json");
  return nlohmann::json::parse(in).get<std::vector<std::vector<int32_t>>>();
}

}  // namespace attn::test
