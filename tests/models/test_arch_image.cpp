// Image preprocessing against Pillow (exact bytes), the preprocessor's geometry, position
// embedding resampling, and rotary embeddings against their formulas.
#include <algorithm>
#include <cmath>
#include <complex>
#include <random>

#include "arch_test_util.h"
#include "models/arch/image.h"
#include "models/arch/interpolate.h"
#include "models/arch/rope.h"
#include "models/formats/hf_config.h"
#include "test_util.h"

namespace attn {
namespace {

using test::golden;
using test::golden_dir;

TEST(ArchImage, ResizeMatchesPillowExactly) {
  for (const char* mode : {"RGB", "L"}) {
    const int ch = std::string(mode) == "RGB" ? 3 : 1;
    const models::Image8 src = models::load_image(golden_dir("vit") + "/image.png", ch);
    for (const char* filter : {"bilinear", "bicubic"}) {
      for (auto [w, h] : {std::pair{53, 31}, std::pair{9, 40}}) {
        const std::string name =
            std::string(mode) + "_" + filter + "_" + std::to_string(w) + "x" + std::to_string(h);
        const models::NpyArray want = golden("resize", name);
        const models::Image8 got =
            resize_image(src, h, w,
                         std::string(filter) == "bicubic" ? models::Resample::Bicubic
                                                          : models::Resample::Bilinear);
        ASSERT_EQ(got.data.size(), want.data.size()) << name;
        int max_diff = 0;
        for (size_t i = 0; i < got.data.size(); ++i) {
          max_diff = std::max(max_diff, std::abs(int(got.data[i]) - int(want.data[i])));
        }
        EXPECT_EQ(max_diff, 0) << name;
      }
    }
  }
}

TEST(ArchImage, PreprocessorShortestEdgeAndCenterCrop) {
  models::HfConfig c;
  c.num_channels = 1;
  c.image_size = 4;
  models::ImagePreprocessor pp = models::ImagePreprocessor::from_folder("/nonexistent", c);
  EXPECT_EQ(pp.height, 4);
  pp.shortest_edge = 4;
  pp.do_center_crop = true;
  pp.crop_height = 2;
  pp.crop_width = 3;
  pp.resample = models::Resample::Nearest;
  pp.do_normalize = false;
  pp.rescale_factor = 1.0;
  models::Image8 img{4, 8, 1, {}};  // 8 wide, 4 tall: already 4 on the short side
  for (int i = 0; i < 32; ++i) img.data.push_back(uint8_t(i));
  const models::Image out = pp(img);
  ASSERT_EQ(out.height, 2);
  ASSERT_EQ(out.width, 3);
  // Crop offsets (4-2)/2 = 1 rows, (8-3)/2 = 2 columns.
  EXPECT_EQ(out.data, (std::vector<float>{10, 11, 12, 18, 19, 20}));
  // A crop larger than the image pads with zeros (normalised), as transformers does.
  pp.crop_height = 6;
  const models::Image padded = pp(img);
  EXPECT_EQ(padded.height, 6);
  EXPECT_EQ(padded.data[0], 0.0f);
  EXPECT_EQ(padded.data[size_t(1 * 3)], 2.0f);  // padded row 1 = image row 0, columns 2..4
}

TEST(ArchImage, GrayscaleIsPillowLuma) {
  const auto dir = test::scratch_dir();
  // P6 (binary RGB): one red, one green, one blue pixel.
  test::write_text(dir / "rgb.ppm", std::string("P6\n3 1\n255\n") + std::string("\xff\x00\x00", 3) +
                                        std::string("\x00\xff\x00", 3) +
                                        std::string("\x00\x00\xff", 3));
  const models::Image8 g = models::load_image((dir / "rgb.ppm").string(), 1);
  // (255 * 19595 + 0x8000) >> 16 = 76, 255 * 38470 -> 150, 255 * 7471 -> 29
  EXPECT_EQ(g.data, (std::vector<uint8_t>{76, 150, 29}));
}

TEST(ArchImage, BicubicGridIdentityAndSmoothness) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n01;
  const int g = 5, c = 3;
  std::vector<float> grid(size_t(g) * g * c);
  for (float& v : grid) v = n01(rng);
  EXPECT_EQ(models::interpolate_grid_bicubic(grid.data(), g, g, c, g, g), grid);
  // Upsampling a row matches cubic convolution (a = -0.75, as torch's bicubic) with the source
  // coordinate (x + 0.5) / 2 - 0.5 and taps clamped at the border, computed here directly.
  std::vector<float> row(size_t(g) * g);
  for (float& v : row) v = n01(rng);
  const std::vector<float> up = models::interpolate_grid_bicubic(row.data(), g, g, 1, g, 2 * g);
  auto w = [](double s) {
    const double a = -0.75, t = std::abs(s);
    return t <= 1 ? ((a + 2) * t - (a + 3)) * t * t + 1
                  : (t < 2 ? ((a * t - 5 * a) * t + 8 * a) * t - 4 * a : 0.0);
  };
  for (int y = 0; y < g; ++y) {
    for (int x = 0; x < 2 * g; ++x) {
      const double src = (x + 0.5) / 2 - 0.5;
      const int x0 = int(std::floor(src));
      double want = 0;
      for (int k = x0 - 1; k <= x0 + 2; ++k) {
        want += w(src - k) * row[size_t(y) * g + size_t(std::clamp(k, 0, g - 1))];
      }
      EXPECT_NEAR(up[size_t(y) * 2 * g + x], want, 1e-5) << y << "," << x;
    }
  }
}

TEST(ArchRope, FrequenciesFollowTheScalingFormulas) {
  const int d = 8;
  models::Rope plain(d, 10000.0, std::nullopt, 0, "test");
  const std::vector<float> f = plain.inv_freq(10);
  for (int i = 0; i < d / 2; ++i) EXPECT_FLOAT_EQ(f[size_t(i)], std::pow(10000.0f, -2.0f * i / d));
  models::RopeScaling lin;
  lin.type = "linear";
  lin.factor = 4;
  const std::vector<float> fl = models::Rope(d, 10000.0, lin, 0, "test").inv_freq(10);
  for (int i = 0; i < d / 2; ++i) EXPECT_FLOAT_EQ(fl[size_t(i)], f[size_t(i)] / 4);
  models::RopeScaling dyn;
  dyn.type = "dynamic";
  dyn.factor = 2;
  models::Rope dynamic(d, 10000.0, dyn, 16, "test");
  EXPECT_EQ(dynamic.inv_freq(16), f);  // within the trained context: unchanged
  const double base = 10000.0 * std::pow(2.0 * 32 / 16 - 1.0, double(d) / (d - 2));
  const std::vector<float> fd = dynamic.inv_freq(32);
  for (int i = 0; i < d / 2; ++i) {
    EXPECT_NEAR(fd[size_t(i)], std::pow(base, -2.0 * i / d), 1e-6 * std::pow(base, -2.0 * i / d));
  }
  models::RopeScaling yarn;
  yarn.type = "yarn";
  EXPECT_ATTN_ERROR(models::Rope(d, 1e4, yarn, 16, "cfg.json"), ErrorCode::Unsupported, "cfg.json",
                    "yarn");
  EXPECT_ATTN_ERROR(models::Rope(7, 1e4, std::nullopt, 16, "cfg.json"), ErrorCode::Format, "even");
}

TEST(ArchRope, RotationIsComplexMultiplicationOfHalves) {
  const int d = 6, n = 9, heads = 2;
  std::mt19937 rng(3);
  std::normal_distribution<float> n01;
  std::vector<float> x(size_t(heads) * n * d);
  for (float& v : x) v = n01(rng);
  std::vector<float> y = x;
  models::Rope rope(d, 100.0, std::nullopt, 0, "test");
  rope.apply(y.data(), heads, n, 2);
  const std::vector<float> f = rope.inv_freq(n);
  for (int h = 0; h < heads; ++h) {
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < d / 2; ++i) {
        const size_t r = (size_t(h) * n + t) * d;
        const std::complex<double> z(x[r + i], x[r + i + d / 2]);
        const std::complex<double> w = z * std::polar(1.0, double(t) * f[size_t(i)]);
        EXPECT_NEAR(y[r + i], w.real(), 1e-5);
        EXPECT_NEAR(y[r + i + d / 2], w.imag(), 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace attn
