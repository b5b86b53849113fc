// Image comparison and external tools for the figure tests.
#pragma once
#include <QImage>
#include <nlohmann/json_fwd.hpp>
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
// "" when two JSON documents are equal, numbers within `tol` (relative to max(1, |a|)); else the
// path of the first difference. Forward passes sum across threads in any order, so two runs of
// one computation agree to rounding, not bit for bit.
std::string json_difference(const nlohmann::json& a, const nlohmann::json& b, double tol = 1e-6);

}  // namespace attn::test
