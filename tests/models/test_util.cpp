#include "test_util.h"

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace attn::test {

std::filesystem::path work_dir() {
  std::filesystem::path p(ATTN_TEST_WORK_DIR);
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

}  // namespace attn::test
