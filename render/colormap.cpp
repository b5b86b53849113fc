#include "render/colormap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

#include "compute/error.h"
#include "render/number_format.h"

namespace attn::render {
namespace {

// Anchors, 0xRRGGBB. Perceptual maps: 52 samples of matplotlib's tables, every 5th of 256 entries
// (within 4/255 of every entry). Blues and RdBu: ColorBrewer's 9 and 11 classes, which are
// matplotlib's own anchors for those maps.
constexpr uint32_t kViridis[] = {
    0x440154, 0x46085c, 0x471063, 0x481769, 0x481d6f, 0x482475, 0x472a7a, 0x46307e, 0x453781,
    0x433d84, 0x414287, 0x3f4889, 0x3d4e8a, 0x3a538b, 0x38598c, 0x355e8d, 0x33638d, 0x31688e,
    0x2e6d8e, 0x2c718e, 0x2a768e, 0x297b8e, 0x27808e, 0x25848e, 0x23898e, 0x218e8d, 0x20928c,
    0x1f978b, 0x1e9c89, 0x1fa188, 0x21a585, 0x24aa83, 0x28ae80, 0x2eb37c, 0x35b779, 0x3dbc74,
    0x46c06f, 0x50c46a, 0x5ac864, 0x65cb5e, 0x70cf57, 0x7cd250, 0x89d548, 0x95d840, 0xa2da37,
    0xb0dd2f, 0xbddf26, 0xcae11f, 0xd8e219, 0xe5e419, 0xf1e51d, 0xfde725};
constexpr uint32_t kMagma[] = {
    0x000004, 0x02020b, 0x050416, 0x090720, 0x0e0b2b, 0x140e36, 0x1a1042, 0x21114e, 0x29115a,
    0x311165, 0x390f6e, 0x420f75, 0x4a1079, 0x52137c, 0x5a167e, 0x621980, 0x6a1c81, 0x721f81,
    0x792282, 0x812581, 0x892881, 0x912b81, 0x992d80, 0xa1307e, 0xaa337d, 0xb2357b, 0xba3878,
    0xc23b75, 0xca3e72, 0xd2426f, 0xd9466b, 0xe04c67, 0xe75263, 0xec5860, 0xf1605d, 0xf4695c,
    0xf7725c, 0xf97b5d, 0xfb8560, 0xfc8e64, 0xfd9869, 0xfea16e, 0xfeaa74, 0xfeb47b, 0xfebd82,
    0xfec68a, 0xfecf92, 0xfed89a, 0xfde2a3, 0xfdebac, 0xfcf4b6, 0xfcfdbf};
constexpr uint32_t kInferno[] = {
    0x000004, 0x02020c, 0x050417, 0x0a0722, 0x10092d, 0x160b39, 0x1e0c45, 0x260c51, 0x2f0a5b,
    0x380962, 0x400a67, 0x490b6a, 0x510e6c, 0x59106e, 0x61136e, 0x69166e, 0x71196e, 0x781c6d,
    0x801f6c, 0x88226a, 0x902568, 0x982766, 0xa02a63, 0xa82e5f, 0xb0315b, 0xb73557, 0xbf3952,
    0xc63d4d, 0xcc4248, 0xd34743, 0xd94d3d, 0xdf5337, 0xe45a31, 0xe9612b, 0xed6925, 0xf1711f,
    0xf47918, 0xf78212, 0xf98b0b, 0xfa9407, 0xfb9d07, 0xfca60c, 0xfcb014, 0xfbba1f, 0xfac42a,
    0xf8cd37, 0xf6d746, 0xf4e156, 0xf2ea69, 0xf2f27d, 0xf5f992, 0xfcffa4};
constexpr uint32_t kPlasma[] = {
    0x0d0887, 0x1b068d, 0x260591, 0x2f0596, 0x38049a, 0x41049d, 0x4903a0, 0x5102a3, 0x5901a5,
    0x6100a7, 0x6900a8, 0x7100a8, 0x7801a8, 0x8004a8, 0x8707a6, 0x8e0ca4, 0x9511a1, 0x9c179e,
    0xa21d9a, 0xa82296, 0xae2892, 0xb42e8d, 0xba3388, 0xbf3984, 0xc43e7f, 0xc9447a, 0xcd4a76,
    0xd24f71, 0xd6556d, 0xda5b69, 0xde6164, 0xe26660, 0xe66c5c, 0xe97257, 0xed7953, 0xf07f4f,
    0xf3854b, 0xf58c46, 0xf79342, 0xf99a3e, 0xfba139, 0xfca835, 0xfdaf31, 0xfeb72d, 0xfebe2a,
    0xfdc627, 0xfcce25, 0xfbd724, 0xf8df25, 0xf6e826, 0xf3f027, 0xf0f921};
constexpr uint32_t kCividis[] = {
    0x00224e, 0x002656, 0x002a5f, 0x002d68, 0x003070, 0x083370, 0x163770, 0x203a6f, 0x273e6e,
    0x2e416d, 0x34456c, 0x3a486c, 0x3f4c6c, 0x444f6c, 0x49536c, 0x4e566c, 0x535a6d, 0x575d6d,
    0x5c616e, 0x60646f, 0x656870, 0x696b71, 0x6d6f72, 0x727274, 0x767676, 0x7a7a78, 0x7e7d78,
    0x838179, 0x888578, 0x8d8878, 0x928c78, 0x969077, 0x9b9476, 0xa09875, 0xa59c74, 0xaaa073,
    0xafa471, 0xb5a86f, 0xbaac6d, 0xbfb06b, 0xc4b468, 0xc9b965, 0xcfbd62, 0xd4c15f, 0xdac65b,
    0xdfca57, 0xe5cf52, 0xead34c, 0xf0d846, 0xf6dd3f, 0xfce236, 0xfee838};
constexpr uint32_t kGray[] = {0xffffff, 0x000000};
constexpr uint32_t kBlues[] = {0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6,
                               0x4292c6, 0x2171b5, 0x08519c, 0x08306b};
constexpr uint32_t kDiverging[] = {0x053061, 0x2166ac, 0x4393c3, 0x92c5de, 0xd1e5f0, 0xf7f7f7,
                                   0xfddbc7, 0xf4a582, 0xd6604d, 0xb2182b, 0x67001f};

struct Entry {
  const char* name;
  std::span<const uint32_t> anchors;
};

// Indexed by Colormap.
constexpr Entry kTable[kColormapCount] = {
    {"viridis", kViridis}, {"magma", kMagma}, {"inferno", kInferno}, {"plasma", kPlasma},
    {"cividis", kCividis}, {"gray", kGray},   {"blues", kBlues},     {"diverging", kDiverging},
};

const Entry& entry(Colormap c) {
  const int i = int(c);
  require(i >= 0 && i < kColormapCount, ErrorCode::InvalidArgument,
          "colour map index " + std::to_string(i) + " out of range");
  return kTable[i];
}

Rgb8 unpack(uint32_t c) {
  return {uint8_t(c >> 16), uint8_t(c >> 8), uint8_t(c)};
}

uint8_t to_u8(float v) {
  return uint8_t(std::lround(std::clamp(v, 0.f, 1.f) * 255.f));
}

}  // namespace

const std::vector<std::string>& colormap_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Entry& e : kTable) out.push_back(e.name);
    return out;
  }();
  return names;
}

const char* colormap_name(Colormap c) {
  return entry(c).name;
}

Colormap colormap_from_name(const std::string& name) {
  for (int i = 0; i < kColormapCount; ++i)
    if (name == kTable[i].name) return Colormap(i);
  std::string known;
  for (const Entry& e : kTable) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw Error(ErrorCode::InvalidArgument,
              "unknown colour map '" + name + "' (known: " + known + ")");
}

Rgb colormap_rgb(Colormap c, double t) {
  const std::span<const uint32_t> a = entry(c).anchors;
  const int segments = int(a.size()) - 1;
  const double x = std::isnan(t) ? 0.0 : std::clamp(t, 0.0, 1.0) * segments;
  const int i = std::min(int(x), segments - 1);
  const float f = float(x - i);
  const Rgb8 lo = unpack(a[size_t(i)]), hi = unpack(a[size_t(i) + 1]);
  auto mix = [f](uint8_t u, uint8_t v) { return (float(u) + (float(v) - float(u)) * f) / 255.f; };
  return {mix(lo.r, hi.r), mix(lo.g, hi.g), mix(lo.b, hi.b)};
}

Rgb8 colormap_rgb8(Colormap c, double t) {
  const Rgb x = colormap_rgb(c, t);
  return {to_u8(x.r), to_u8(x.g), to_u8(x.b)};
}

uint32_t colormap_u32(Colormap c, double t, int alpha) {
  const Rgb8 x = colormap_rgb8(c, t);
  return (uint32_t(std::clamp(alpha, 0, 255)) << 24) | (uint32_t(x.b) << 16) |
         (uint32_t(x.g) << 8) | uint32_t(x.r);
}

std::vector<Rgb8> colormap_stops(Colormap c) {
  std::vector<Rgb8> out;
  for (uint32_t a : entry(c).anchors) out.push_back(unpack(a));
  return out;
}

std::vector<uint8_t> colormap_lut_rgba8() {
  std::vector<uint8_t> out(size_t(kColormapCount) * 256 * 4);
  for (int row = 0; row < kColormapCount; ++row)
    for (int i = 0; i < 256; ++i) {
      const Rgb8 x = colormap_rgb8(Colormap(row), double(i) / 255.0);
      uint8_t* p = &out[(size_t(row) * 256 + size_t(i)) * 4];
      p[0] = x.r;
      p[1] = x.g;
      p[2] = x.b;
      p[3] = 255;
    }
  return out;
}

double color_position(double v, double vmax, bool log_scale) {
  if (!(vmax > 0) || !std::isfinite(v)) return 0;
  if (!log_scale) return std::clamp(v / vmax, 0.0, 1.0);
  const double lo = vmax * 1e-4;
  if (v <= lo) return 0;
  return std::clamp(std::log10(v / lo) / 4.0, 0.0, 1.0);
}

double ValueRange::position(double v) const {
  if (std::isnan(v)) return v;
  if (flat) return 0.5;
  return std::clamp((v - lo) / (hi - lo), 0.0, 1.0);
}

ValueRange value_range(const std::vector<float>& values, bool unit) {
  ValueRange r;
  double lo = INFINITY, hi = -INFINITY;
  for (float x : values)
    if (std::isfinite(x)) lo = std::min(lo, double(x)), hi = std::max(hi, double(x));
  const bool any = lo <= hi;
  auto label = [](double v, int digits) {
    char b[48];
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    return std::string(b);
  };
  if (unit) {
    r.lo = 0;
    r.hi = 1;
  } else if (!any) {
    r.flat = true;
    r.note = "no values";
  } else if (hi - lo <= 1e-6 * std::max({1.0, std::fabs(lo), std::fabs(hi)})) {
    r.lo = lo;
    r.hi = hi;
    r.flat = true;
    r.note = "every value within " + label(hi - lo, 2) +
             " of each other: below numerical noise, shown in one colour";
  } else {
    r.lo = lo;
    r.hi = hi;
  }
  int digits = 3;
  do {
    // Rounding noise (an output error of 3.1e-13 where 0 is meant) reads 0, never "-0".
    r.lo_label = format_number(r.lo, digits, 1e-9);
    r.hi_label = format_number(r.hi, digits, 1e-9);
  } while (r.lo_label == r.hi_label && r.lo != r.hi && ++digits <= 9);
  return r;
}

}  // namespace attn::render
