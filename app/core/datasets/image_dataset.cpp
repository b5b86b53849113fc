#include "app/core/datasets/image_dataset.h"

#include <algorithm>
#include <filesystem>

#include "compute/error.h"
#include "models/formats/idx.h"

namespace attn::core {

namespace {
namespace fs = std::filesystem;

// The IDX file `stem` in `dir`, gzipped or not; empty when neither exists.
std::string idx_file(const fs::path& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    const fs::path p = dir / (stem + ext);
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return {};
}

// Splits "FOLDER:train" into the folder and the split prefix ("t10k" by default).
std::pair<fs::path, std::string> idx_split(const std::string& path) {
  for (const auto& [suffix, prefix] : {std::pair{":train", "train"}, {":test", "t10k"}})
    if (path.size() > std::string(suffix).size() && path.ends_with(suffix))
      return {fs::path(path.substr(0, path.size() - std::string(suffix).size())), prefix};
  return {fs::path(path), "t10k"};
}

bool image_extension(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* x : {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga", ".pgm", ".ppm", ".pnm",
                        ".psd", ".hdr", ".pic"})
    if (e == x) return true;
  return false;
}

std::vector<fs::path> sorted_entries(const fs::path& dir, bool dirs) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (dirs ? e.is_directory(ec2) : (e.is_regular_file(ec2) && image_extension(e.path())))
      out.push_back(e.path());
  }
  require(!ec, ErrorCode::Io, dir.string() + ": cannot list (" + ec.message() + ")");
  std::sort(out.begin(), out.end());
  return out;
}

ImageDataset read_idx_dataset(const fs::path& dir, const std::string& prefix, int channels,
                              int64_t limit) {
  const std::string images_path = idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = idx_file(dir, prefix + "-labels-idx1-ubyte");
  require(!labels_path.empty(), ErrorCode::Io,
          dir.string() + ": " + prefix + "-labels-idx1-ubyte[.gz] is missing beside the images");
  const models::IdxArray images = models::read_idx(images_path),
                         labels = models::read_idx(labels_path);
  require(images.shape.size() == 3, ErrorCode::Format,
          images_path + ": images are [count, rows, cols], not " +
              std::to_string(images.shape.size()) + " dimensions");
  require(labels.shape.size() == 1, ErrorCode::Format,
          labels_path + ": labels are [count], not " + std::to_string(labels.shape.size()) +
              " dimensions");
  require(images.shape[0] == labels.shape[0], ErrorCode::Format,
          images_path + " holds " + std::to_string(images.shape[0]) + " images but " + labels_path +
              " " + std::to_string(labels.shape[0]) + " labels");
  const int h = int(images.shape[1]), w = int(images.shape[2]);
  require(h <= models::kMaxImageSide && w <= models::kMaxImageSide, ErrorCode::Format,
          images_path + ": images of " + std::to_string(w) + "x" + std::to_string(h) +
              " exceed the image size limit");
  const int64_t n = limit > 0 ? std::min<int64_t>(limit, images.shape[0]) : images.shape[0];
  const std::string name = fs::path(images_path).filename().string();
  ImageDataset d;
  d.records.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    ImageRecord& r = d.records[size_t(i)];
    r.source = name + ":" + std::to_string(i);
    r.label = labels.data[size_t(i)];
    r.image.height = h;
    r.image.width = w;
    r.image.channels = channels;
    const uint8_t* px = images.data.data() + size_t(i) * size_t(h) * size_t(w);
    r.image.data.resize(size_t(h) * w * channels);
    for (size_t p = 0; p < size_t(h) * w; ++p)
      for (int c = 0; c < channels; ++c) r.image.data[p * channels + c] = px[p];
  }
  return d;
}

}  // namespace

bool is_image_dataset(const std::string& path) {
  const auto [dir, prefix] = idx_split(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  if (!idx_file(dir, prefix + "-images-idx3-ubyte").empty()) return true;
  if (!sorted_entries(dir, false).empty()) return true;
  for (const fs::path& sub : sorted_entries(dir, true))
    if (!sorted_entries(sub, false).empty()) return true;
  return false;
}

ImageDataset read_image_dataset(const std::string& path, int channels, int64_t limit) {
  require(channels == 1 || channels == 3, ErrorCode::InvalidArgument,
          "image dataset: channels must be 1 or 3, not " + std::to_string(channels));
  const auto [dir, prefix] = idx_split(path);
  std::error_code ec;
  require(fs::is_directory(dir, ec), ErrorCode::Io,
          dir.string() + ": not a folder (an image dataset is a folder of IDX files or images)");
  if (!idx_file(dir, prefix + "-images-idx3-ubyte").empty())
    return read_idx_dataset(dir, prefix, channels, limit);
  ImageDataset d;
  // Class folders, or the images of the folder itself.
  std::vector<std::pair<fs::path, int>> files;
  for (const fs::path& f : sorted_entries(dir, false)) files.push_back({f, -1});
  if (files.empty())
    for (const fs::path& sub : sorted_entries(dir, true)) {
      const std::vector<fs::path> in = sorted_entries(sub, false);
      if (in.empty()) continue;
      const int label = int(d.classes.size());
      d.classes.push_back(sub.filename().string());
      for (const fs::path& f : in) files.push_back({f, label});
    }
  require(!files.empty(), ErrorCode::Format,
          dir.string() + ": no images (nor " + prefix + "-images-idx3-ubyte IDX files) found");
  if (limit > 0 && int64_t(files.size()) > limit) files.resize(size_t(limit));
  for (const auto& [f, label] : files)
    d.records.push_back({f.string(), models::load_image(f.string(), channels), label});
  return d;
}

}  // namespace attn::core
