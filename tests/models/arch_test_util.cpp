#include "arch_test_util.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "test_util.h"

namespace attn::test {

std::string golden_dir(const std::string& name) {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/../ref/goldens/" + name;
}

models::NpyArray golden(const std::string& name, const std::string& file) {
  return models::read_npy(golden_dir(name) + "/" + file + ".npy");
}

std::vector<int32_t> golden_ints(const std::string& name, const std::string& file) {
  const models::NpyArray a = golden(name, file);
  std::vector<int32_t> out;
  for (float v : a.to_f32()) out.push_back(int32_t(v));
  return out;
}

double max_rel_error(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size() || want.empty()) return INFINITY;
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

std::string copy_model(const std::string& name) {
  const auto dst = scratch_dir() / name;
  std::filesystem::create_directories(dst);
  for (const auto& e : std::filesystem::directory_iterator(golden_dir(name))) {
    std::filesystem::copy_file(e.path(), dst / e.path().filename());
  }
  return dst.string();
}

}  // namespace attn::test
