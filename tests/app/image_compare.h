// Image comparison and external tools for the figure tests.
#pragma once
#include <QImage>
#include <string>

namespace attn::test {

struct ImageDiff {
  bool same_size = false;
  double mean_abs = 0;  // mean |a - b| over pixels and RGB channels, 0..255
  double frac_far = 0;  // fraction of pixels whose largest channel difference exceeds 64
};
ImageDiff compare_images(const QImage& a, const QImage& b);

// Runs a shell command; returns its exit status and fills `out` with stdout + stderr.
int run_command(const std::string& cmd, std::string* out = nullptr);
// True when `tool` is on PATH.
bool have_tool(const std::string& tool);
// Reads a whole file.
std::string read_all(const std::string& path);
// A fresh, empty folder under the test work dir.
std::string fresh_dir(const std::string& name);

}  // namespace attn::test
