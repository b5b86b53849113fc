#include "tests/app/image_compare.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace attn::test {

ImageDiff compare_images(const QImage& a0, const QImage& b0) {
  ImageDiff d;
  if (a0.size() != b0.size() || a0.isNull()) return d;
  d.same_size = true;
  const QImage a = a0.convertToFormat(QImage::Format_RGB32);
  const QImage b = b0.convertToFormat(QImage::Format_RGB32);
  double sum = 0;
  int64_t far = 0;
  for (int y = 0; y < a.height(); ++y) {
    const QRgb* pa = reinterpret_cast<const QRgb*>(a.constScanLine(y));
    const QRgb* pb = reinterpret_cast<const QRgb*>(b.constScanLine(y));
    for (int x = 0; x < a.width(); ++x) {
      const int dr = std::abs(qRed(pa[x]) - qRed(pb[x]));
      const int dg = std::abs(qGreen(pa[x]) - qGreen(pb[x]));
      const int db = std::abs(qBlue(pa[x]) - qBlue(pb[x]));
      sum += dr + dg + db;
      if (std::max({dr, dg, db}) > 64) ++far;
    }
  }
  const double n = double(a.width()) * a.height();
  d.mean_abs = sum / (3 * n);
  d.frac_far = double(far) / n;
  return d;
}

int run_command(const std::string& cmd, std::string* out) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  std::string text;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) text.append(buf.data(), n);
  const int status = pclose(f);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool have_tool(const std::string& tool) {
  return run_command("command -v " + tool + " >/dev/null") == 0;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string fresh_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::path(ATTN_TEST_WORK_DIR) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace attn::test

namespace attn::test {

std::string json_difference(const nlohmann::json& a, const nlohmann::json& b, double tol) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::abs(x - y) <= tol * std::max(1.0, std::abs(x))
               ? ""
               : ": " + a.dump() + " vs " + b.dump();
  }
  if (a.type() != b.type()) return ": " + a.dump().substr(0, 80) + " vs " + b.dump().substr(0, 80);
  if (a.is_array()) {
    if (a.size() != b.size())
      return ": sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string d = json_difference(a[i], b[i], tol);
      if (!d.empty()) return "[" + std::to_string(i) + "]" + d;
    }
    return "";
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return ": keys differ";
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) return "." + it.key() + ": missing";
      const std::string d = json_difference(it.value(), b.at(it.key()), tol);
      if (!d.empty()) return "." + it.key() + d;
    }
    return "";
  }
  return a == b ? "" : ": " + a.dump().substr(0, 80) + " vs " + b.dump().substr(0, 80);
}

}  // namespace attn::test
