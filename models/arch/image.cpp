#include "models/arch/image.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "compute/error.h"
#include "models/formats/hf_config.h"

#define STBI_NO_STDIO  // as in stb_image_impl.cpp, which holds the implementation
#include <stb_image.h>

namespace attn::models {
namespace {

// Pillow's RGB -> L: ITU-R 601-2 luma in 16-bit fixed point.
uint8_t luma(uint8_t r, uint8_t g, uint8_t b) {
  return uint8_t((uint32_t(r) * 19595 + uint32_t(g) * 38470 + uint32_t(b) * 7471 + 0x8000) >> 16);
}

double filter_support(Resample r) {
  return r == Resample::Bicubic ? 2.0 : r == Resample::Bilinear ? 1.0 : 0.5;
}

double filter(Resample r, double x) {
  x = std::fabs(x);
  switch (r) {
    case Resample::Nearest:
      return x <= 0.5 ? 1.0 : 0.0;
    case Resample::Bilinear:
      return x < 1.0 ? 1.0 - x : 0.0;
    case Resample::Bicubic: {
      const double a = -0.5;
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
      if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
      return 0.0;
    }
  }
  return 0.0;
}

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's fixed-point weights for 8-bit images

// Weights of one output coordinate over inputs [first, first + count).
struct Taps {
  int first = 0;
  std::vector<int32_t> w;
};

std::vector<Taps> coefficients(int in_size, int out_size, Resample r) {
  const double scale = double(in_size) / out_size;
  const double fscale = std::max(scale, 1.0);
  const double support = filter_support(r) * fscale;
  std::vector<Taps> taps(static_cast<size_t>(out_size));
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    int lo = int(center - support + 0.5);
    int hi = int(center + support + 0.5);
    lo = std::max(lo, 0);
    hi = std::min(hi, in_size);
    std::vector<double> k(size_t(std::max(hi - lo, 0)));
    double sum = 0;
    for (int x = lo; x < hi; ++x) sum += k[size_t(x - lo)] = filter(r, (x - center + 0.5) / fscale);
    Taps& t = taps[size_t(o)];
    t.first = lo;
    for (double w : k) {
      const double v = (sum != 0.0 ? w / sum : w) * double(1 << kPrecisionBits);
      t.w.push_back(int32_t(v < 0 ? v - 0.5 : v + 0.5));
    }
  }
  return taps;
}

uint8_t clip8(int64_t acc) {
  const int64_t v = acc >> kPrecisionBits;
  return uint8_t(std::clamp<int64_t>(v, 0, 255));
}

// One separable pass along `horizontal` (width) or vertical (height).
Image8 resample_pass(const Image8& in, int out_size, bool horizontal, Resample r) {
  const int in_size = horizontal ? in.width : in.height;
  const std::vector<Taps> taps = coefficients(in_size, out_size, r);
  Image8 out;
  out.channels = in.channels;
  out.height = horizontal ? in.height : out_size;
  out.width = horizontal ? out_size : in.width;
  out.data.resize(size_t(out.height) * out.width * out.channels);
  const int c = in.channels;
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      const Taps& t = taps[size_t(horizontal ? x : y)];
      for (int ch = 0; ch < c; ++ch) {
        int64_t acc = int64_t(1) << (kPrecisionBits - 1);
        for (size_t k = 0; k < t.w.size(); ++k) {
          const int sx = horizontal ? t.first + int(k) : x;
          const int sy = horizontal ? y : t.first + int(k);
          acc += int64_t(in.data[(size_t(sy) * in.width + sx) * c + ch]) * t.w[k];
        }
        out.data[(size_t(y) * out.width + x) * c + ch] = clip8(acc);
      }
    }
  }
  return out;
}

Image8 resize_nearest(const Image8& in, int height, int width) {
  Image8 out{height, width, in.channels, {}};
  out.data.resize(size_t(height) * width * in.channels);
  for (int y = 0; y < height; ++y) {
    const int sy = std::min(in.height - 1, int((y + 0.5) * in.height / height));
    for (int x = 0; x < width; ++x) {
      const int sx = std::min(in.width - 1, int((x + 0.5) * in.width / width));
      std::copy_n(&in.data[(size_t(sy) * in.width + sx) * in.channels], in.channels,
                  &out.data[(size_t(y) * width + x) * in.channels]);
    }
  }
  return out;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::Io, path + ": cannot open image");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxImageFileBytes) {
    throw Error(ErrorCode::Format,
                path + ": image file has " + std::to_string(size) + " bytes, over the limit of " +
                    std::to_string(kMaxImageFileBytes) + " (kMaxImageFileBytes)");
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The most pixels a well-formed file of each format packs into one byte, with its densest
// encoding: stb_image allocates (and for most formats fills) the whole image before it finds
// out that the data runs short, so a header claiming more pixels than the file can hold is
// refused first.
struct FormatDensity {
  const char* name;
  const char* magic;
  size_t magic_len;
  int64_t pixels_per_byte;
};
constexpr FormatDensity kDensities[] = {
    {"PNG", "\x89PNG", 4, 8 * 1032},  // 1-bit pixels, deflate's 1032:1
    {"JPEG", "\xFF\xD8", 2, 1024},    // a 1-bit code per 8x8 block (512), with margin
    {"GIF", "GIF8", 4, 4096},         // 12-bit LZW codes of up to 4096 pixels
    {"BMP", "BM", 2, 8},              // 1-bit pixels, uncompressed
    {"PSD", "8BPS", 4, 64},           // PackBits: 128 bytes in 2
    {"HDR", "#?", 2, 64},             // RLE: 127 per 2 bytes and channel
    {"PNM", "P5", 2, 1},              // one byte per sample at least
    {"PNM", "P6", 2, 1},
    {"PIC", "\x53\x80\xF6\x34", 4, 16384},  // Softimage runs of up to 65535 in 4 bytes
    // TGA has no magic: RLE runs of 128 pixels in a header byte and one 8-bit pixel.
    {"TGA", "", 0, 64},
};

const FormatDensity& density_of(std::span<const uint8_t> bytes) {
  for (const FormatDensity& f : kDensities) {
    if (f.magic_len && bytes.size() >= f.magic_len &&
        std::equal(f.magic, f.magic + f.magic_len, reinterpret_cast<const char*>(bytes.data()))) {
      return f;
    }
  }
  return kDensities[std::size(kDensities) - 1];
}

// stb_image up to v2.27 (Debian 12's) builds a JPEG Huffman table from a DHT segment without
// checking that its 16 code counts sum to at most 256, and writes one size byte per code into a
// 257-byte array: a crafted table writes up to 4 KB past it, out of the decoder's state (fixed
// in stb_image v2.28). Every "FF C4" in the file is walked as stb walks a DHT segment (one
// class/slot byte, 16 counts, the values; repeated while the segment length lasts), which covers
// every segment stb can reach and can only refuse more, never less.
bool jpeg_huffman_tables_fit(std::span<const uint8_t> b) {
  for (size_t at = 0; at + 1 < b.size(); ++at) {
    if (b[at] != 0xFF || b[at + 1] != 0xC4) continue;
    size_t p = at + 2;
    if (p + 2 > b.size()) break;
    int64_t left = (int64_t(b[p]) << 8 | b[p + 1]) - 2;
    p += 2;
    while (left > 0 && p < b.size()) {
      int codes = 0;  // stb reads zeros past the end of the file
      for (size_t i = 1; i <= 16 && p + i < b.size(); ++i) codes += b[p + i];
      if (codes > 256) return false;
      p += 17 + size_t(codes);
      left -= 17 + codes;
    }
  }
  return true;
}

// stb_image v2.27 reads a binary PNM header's width, height and maximum value into an int with
// value = value * 10 + digit and no bound, so a long digit run overflows (found by tests/fuzz).
// The header is walked as stb walks it (whitespace and '#' comments between the numbers): true
// when every number fits an int.
bool pnm_header_numbers_fit(std::span<const uint8_t> b) {
  size_t p = 2;
  auto space = [](uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  for (int n = 0; n < 3; ++n) {
    while (p < b.size() && (space(b[p]) || b[p] == '#')) {
      if (b[p] == '#')
        while (p < b.size() && b[p] != '\n' && b[p] != '\r') ++p;
      else
        ++p;
    }
    int64_t value = 0;
    for (; p < b.size() && b[p] >= '0' && b[p] <= '9'; ++p) {
      value = value * 10 + (b[p] - '0');
      if (value > INT32_MAX) return false;
    }
  }
  return true;
}

}  // namespace

Image8 decode_image(std::span<const uint8_t> bytes, const std::string& name, int channels) {
  require(channels == 1 || channels == 3, ErrorCode::InvalidArgument,
          name + ": images decode to 1 or 3 channels, not " + std::to_string(channels));
  if (bytes.empty()) throw Error(ErrorCode::Format, name + ": empty file, not an image");
  if (bytes.size() > size_t(INT32_MAX)) throw Error(ErrorCode::Format, name + ": file too large");
  int w = 0, h = 0, comp = 0;
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = int(bytes.size());
  // Before stb reads any table (stbi_info builds those ahead of the frame header); stb takes
  // any file that opens with FF bytes and D8 as a JPEG.
  if (bytes[0] == 0xFF && !jpeg_huffman_tables_fit(bytes)) {
    throw Error(ErrorCode::Format,
                name + ": corrupt JPEG (a Huffman table defines more than 256 codes)");
  }
  if (bytes.size() >= 2 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '6') &&
      !pnm_header_numbers_fit(bytes)) {
    throw Error(ErrorCode::Format, name + ": corrupt PNM (a header number is too large)");
  }
  if (!stbi_info_from_memory(data, len, &w, &h, &comp)) {
    throw Error(ErrorCode::Format, name + ": not an image this build can decode (" +
                                       stbi_failure_reason() +
                                       "; PNG, JPEG, BMP, GIF, TGA, PSD, HDR, PNM are read)");
  }
  if (w <= 0 || h <= 0) {
    throw Error(ErrorCode::Format, name + ": image is " + std::to_string(w) + "x" +
                                       std::to_string(h) + " pixels; it needs at least 1x1");
  }
  if (w > kMaxImageSide || h > kMaxImageSide || int64_t(w) * h > kMaxImagePixels) {
    throw Error(ErrorCode::Format,
                name + ": image is " + std::to_string(w) + "x" + std::to_string(h) +
                    " pixels; the limit is " + std::to_string(kMaxImageSide) +
                    " per side (kMaxImageSide) and " + std::to_string(kMaxImagePixels) +
                    " pixels (kMaxImagePixels); downscale it first");
  }
  const FormatDensity& fd = density_of(bytes);
  const int64_t most = int64_t(bytes.size()) * fd.pixels_per_byte;
  if (int64_t(w) * h > most) {
    throw Error(ErrorCode::Format, name + ": image header claims " + std::to_string(w) + "x" +
                                       std::to_string(h) + " pixels but the file has " +
                                       std::to_string(bytes.size()) + " bytes; a " + fd.name +
                                       " file that size holds at most " + std::to_string(most) +
                                       " pixels (truncated or corrupt?)");
  }
  // The file's own channels (req_comp 0), converted to RGB here as stb would (gray repeated,
  // alpha dropped): stb v2.27 converts 16-bit PNM samples with its 8-bit converter, then reads
  // twice the buffer it made (fixed in v2.28; found by tests/fuzz).
  stbi_uc* px = stbi_load_from_memory(data, len, &w, &h, &comp, 0);
  if (!px) {
    throw Error(ErrorCode::Format,
                name + ": cannot decode image (" + std::string(stbi_failure_reason()) + ")");
  }
  if (comp < 1 || comp > 4) {
    stbi_image_free(px);
    throw Error(ErrorCode::Format,
                name + ": cannot decode image (" + std::to_string(comp) + " channels per pixel)");
  }
  Image8 img{h, w, channels, {}};
  const size_t n = size_t(w) * h;
  img.data.resize(n * size_t(channels));
  for (size_t i = 0; i < n; ++i) {
    const stbi_uc* p = px + i * size_t(comp);
    const stbi_uc r = p[0], g = comp >= 3 ? p[1] : p[0], b = comp >= 3 ? p[2] : p[0];
    if (channels == 3) {
      img.data[3 * i] = r;
      img.data[3 * i + 1] = g;
      img.data[3 * i + 2] = b;
    } else {
      img.data[i] = luma(r, g, b);
    }
  }
  stbi_image_free(px);
  return img;
}

Image8 load_image(const std::string& path, int channels) {
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_image(bytes, path, channels);
}

Resample resample_from_pil(int code) {
  switch (code) {
    case 0:
      return Resample::Nearest;
    case 2:
      return Resample::Bilinear;
    case 3:
      return Resample::Bicubic;
  }
  throw Error(ErrorCode::Unsupported, "resample " + std::to_string(code) +
                                          " is not supported (0 nearest, 2 bilinear, 3 bicubic)");
}

Image8 resize_image(const Image8& in, int height, int width, Resample r) {
  require(height > 0 && width > 0 && in.height > 0 && in.width > 0, ErrorCode::InvalidArgument,
          "resize_image: sizes must be positive");
  if (r == Resample::Nearest) return resize_nearest(in, height, width);
  Image8 cur = in;
  if (width != in.width) cur = resample_pass(cur, width, true, r);
  if (height != in.height) cur = resample_pass(cur, height, false, r);
  return cur;
}

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw Error(ErrorCode::Format, file + ": " + what);
}

int get_int(const json& j, const std::string& file, const char* key) {
  if (!j.is_number_integer() || j.get<int64_t>() <= 0 || j.get<int64_t>() > kMaxImageSide) {
    bad(file, std::string("key '") + key + "' must be a positive integer, found " + j.dump());
  }
  return int(j.get<int64_t>());
}

// "size" / "crop_size": an integer, {"height", "width"} or {"shortest_edge"}.
void parse_size(const json& j, const std::string& file, const char* key, int* h, int* w,
                int* shortest) {
  if (j.is_number()) {
    *h = *w = get_int(j, file, key);
  } else if (j.is_object() && j.contains("height") && j.contains("width")) {
    *h = get_int(j["height"], file, key);
    *w = get_int(j["width"], file, key);
  } else if (j.is_object() && j.contains("shortest_edge") && shortest) {
    *shortest = get_int(j["shortest_edge"], file, key);
  } else {
    bad(file, std::string("key '") + key + "' must be an integer or {height, width}" +
                  (shortest ? " or {shortest_edge}" : "") + ", found " + j.dump());
  }
}

std::vector<double> get_channels(const json& j, const std::string& file, const char* key, int ch) {
  std::vector<double> v;
  if (j.is_number()) v.assign(size_t(ch), j.get<double>());
  if (j.is_array()) {
    for (const json& x : j) {
      if (!x.is_number()) bad(file, std::string("key '") + key + "' must hold numbers");
      v.push_back(x.get<double>());
    }
  }
  if (v.size() == 1 && ch > 1) v.assign(size_t(ch), v[0]);
  if (int(v.size()) != ch) {
    bad(file, std::string("key '") + key + "' has " + std::to_string(v.size()) +
                  " values; the model has " + std::to_string(ch) + " channels");
  }
  return v;
}

bool get_bool(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
}

}  // namespace

ImagePreprocessor ImagePreprocessor::from_folder(const std::string& dir, const HfConfig& config) {
  ImagePreprocessor pp;
  pp.channels = int(config.num_channels > 0 ? config.num_channels : 3);
  pp.height = pp.width = int(config.image_size > 0 ? config.image_size : 224);
  pp.crop_height = pp.crop_width = pp.height;
  pp.mean.assign(size_t(pp.channels), 0.5);
  pp.std.assign(size_t(pp.channels), 0.5);
  const std::filesystem::path file = std::filesystem::path(dir) / "preprocessor_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return pp;
  const std::string f = file.string();
  std::ifstream in(file);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    bad(f, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad(f, "not a JSON object");
  pp.do_resize = get_bool(j, "do_resize", true);
  if (j.contains("size"))
    parse_size(j["size"], f, "size", &pp.height, &pp.width, &pp.shortest_edge);
  if (j.contains("resample")) {
    if (!j["resample"].is_number_integer()) bad(f, "key 'resample' must be an integer");
    try {
      pp.resample = resample_from_pil(j["resample"].get<int>());
    } catch (const Error& e) {
      throw Error(ErrorCode::Unsupported, f + ": " + e.what());
    }
  }
  pp.do_center_crop = get_bool(j, "do_center_crop", false);
  if (j.contains("crop_size")) {
    parse_size(j["crop_size"], f, "crop_size", &pp.crop_height, &pp.crop_width, nullptr);
  }
  pp.do_rescale = get_bool(j, "do_rescale", true);
  if (j.contains("rescale_factor")) {
    if (!j["rescale_factor"].is_number()) bad(f, "key 'rescale_factor' must be a number");
    pp.rescale_factor = j["rescale_factor"].get<double>();
  }
  pp.do_normalize = get_bool(j, "do_normalize", true);
  if (j.contains("image_mean"))
    pp.mean = get_channels(j["image_mean"], f, "image_mean", pp.channels);
  if (j.contains("image_std")) pp.std = get_channels(j["image_std"], f, "image_std", pp.channels);
  for (double s : pp.std) {
    if (s == 0.0) bad(f, "key 'image_std' holds a zero");
  }
  return pp;
}

Image ImagePreprocessor::operator()(const Image8& in) const {
  require(in.channels == channels, ErrorCode::InvalidArgument,
          "image has " + std::to_string(in.channels) + " channels; the model takes " +
              std::to_string(channels));
  require(in.height > 0 && in.width > 0, ErrorCode::InvalidArgument, "image is empty");
  Image8 img = in;
  if (do_resize) {
    int h = height, w = width;
    if (shortest_edge > 0) {
      // transformers' get_resize_output_image_size: the long side scales by the same ratio.
      const bool tall = img.height >= img.width;
      const int s = tall ? img.width : img.height, l = tall ? img.height : img.width;
      const int nl = int(int64_t(shortest_edge) * l / s);
      h = tall ? nl : shortest_edge;
      w = tall ? shortest_edge : nl;
    }
    if (h != img.height || w != img.width) img = resize_image(img, h, w, resample);
  }
  int top = 0, left = 0, oh = img.height, ow = img.width;
  if (do_center_crop) {
    oh = crop_height;
    ow = crop_width;
    top = (img.height - oh) / 2;  // negative: pad with zeros, as transformers does
    left = (img.width - ow) / 2;
  }
  Image out;
  out.channels = channels;
  out.height = oh;
  out.width = ow;
  out.data.assign(size_t(channels) * oh * ow, 0.0f);
  for (int c = 0; c < channels; ++c) {
    const double m = do_normalize ? mean[size_t(c)] : 0.0;
    const double s = do_normalize ? std[size_t(c)] : 1.0;
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        const int sy = y + top, sx = x + left;
        double v = 0;
        if (sy >= 0 && sy < img.height && sx >= 0 && sx < img.width) {
          v = img.data[(size_t(sy) * img.width + sx) * channels + c];
        }
        if (do_rescale) v *= rescale_factor;
        out.data[(size_t(c) * oh + y) * ow + x] = float((v - m) / s);
      }
    }
  }
  return out;
}

}  // namespace attn::models
