// Figure export: golden images per preset (synthetic data, small tolerance), SVG that parses and
// keeps text as text, a one-page PDF of the requested size that renders like the PNG export.
// Regenerate goldens with ATTN_UPDATE_GOLDENS=1 (then look at them before committing).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "app/figures/canvas.h"
#include "app/figures/figure.h"
#include "compute/error.h"
#include "tests/app/figure_fixtures.h"
#include "tests/app/image_compare.h"

// LeakSanitizer (asan preset): Qt's font database and fontconfig keep allocations until exit.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libfontconfig\nleak:libQt6Gui\nleak:libQt6Core\nleak:libfreetype\n";
}

namespace attn {
namespace {
namespace fs = std::filesystem;
using test::compare_images;
using test::synthetic_figure;

const FigureSize kGoldenSize{600, 400, 100};  // 6 x 4 in at 100 dpi

std::string golden_path(View v) {
  return std::string(ATTN_TEST_SOURCE_DIR) + "/tests/app/golden/" + view_name(v) + ".png";
}

// Small tolerance: anti-aliasing may differ a little between FreeType/Qt builds; a moved or
// missing element changes far more.
bool matches(const QImage& a, const QImage& b, std::string* why) {
  const test::ImageDiff d = compare_images(a, b);
  *why = "size " + std::to_string(a.width()) + "x" + std::to_string(a.height()) + " vs " +
         std::to_string(b.width()) + "x" + std::to_string(b.height()) + ", mean |diff| " +
         std::to_string(d.mean_abs) + ", far pixels " + std::to_string(d.frac_far);
  return d.same_size && d.mean_abs < 1.0 && d.frac_far < 0.003;
}

class Golden : public ::testing::TestWithParam<View> {};

TEST_P(Golden, PresetMatchesGoldenImage) {
  const View v = GetParam();
  const QImage img = render_figure_image(synthetic_figure(v), kGoldenSize);
  ASSERT_EQ(img.width(), kGoldenSize.width);
  ASSERT_EQ(img.height(), kGoldenSize.height);
  EXPECT_NEAR(img.dotsPerMeterX() * 0.0254, 100.0, 0.05);
  const std::string path = golden_path(v);
  if (std::getenv("ATTN_UPDATE_GOLDENS")) {
    fs::create_directories(fs::path(path).parent_path());
    ASSERT_TRUE(img.save(QString::fromStdString(path), "PNG"));
    GTEST_SKIP() << "wrote " << path;
  }
  const QImage golden(QString::fromStdString(path));
  ASSERT_FALSE(golden.isNull()) << path << " is missing (ATTN_UPDATE_GOLDENS=1 writes it)";
  std::string why;
  EXPECT_TRUE(matches(img, golden, &why)) << view_name(v) << ": " << why;
  // The comparison can fail: another preset's image does not match this golden.
  const View other = v == View::Heatmap ? View::Sinks : View::Heatmap;
  EXPECT_FALSE(matches(render_figure_image(synthetic_figure(other), kGoldenSize), golden, &why));
}

INSTANTIATE_TEST_SUITE_P(Presets, Golden,
                         ::testing::Values(View::Heatmap, View::Variants, View::Grid, View::Sinks,
                                           View::Image, View::Tradeoff, View::Tokens),
                         [](const auto& info) { return std::string(view_name(info.param)); });

TEST(Figures, GoldenCatchesSmallDataChanges) {
  FigureData f = synthetic_figure(View::Heatmap);
  const QImage a = render_figure_image(f, kGoldenSize);
  // Later queries put all their mass on the first token.
  HeatmapData& h = f.heatmaps[0];
  for (int i = h.rows / 2; i < h.rows; ++i)
    for (int j = 0; j < h.cols; ++j) h.cells[size_t(i * h.cols + j)] = j == 0 ? 1.0f : 0.0f;
  const QImage b = render_figure_image(f, kGoldenSize);
  std::string why;
  EXPECT_FALSE(matches(a, b, &why)) << why;
  EXPECT_TRUE(matches(a, a, &why));
}

TEST(Figures, SvgParsesAndKeepsTextAndColorbar) {
  if (!test::have_tool("xmllint")) GTEST_SKIP() << "xmllint not installed (libxml2-utils)";
  const std::string dir = test::fresh_dir("svg");
  const std::string out = dir + "/variants.svg";
  export_figure(synthetic_figure(View::Variants), out, kGoldenSize);
  std::string log;
  ASSERT_EQ(test::run_command("xmllint --noout '" + out + "'", &log), 0) << log;
  const std::string svg = test::read_all(out);
  for (const char* needle :
       {">Query token<", ">Key token<", ">Attention probability<", ">The<", ">the<",
        ">Sliding window<", ">size=4<", "<linearGradient", "<title>Synthetic variants</title>"})
    EXPECT_NE(svg.find(needle), std::string::npos) << needle;
  // Colour-bar tick labels are text too.
  EXPECT_TRUE(std::regex_search(svg, std::regex(">0\\.[0-9]+<"))) << "no colour-bar tick";
  // Small maps are rectangles; text is never converted to paths.
  EXPECT_GT(std::count(svg.begin(), svg.end(), '<'), 200);
  EXPECT_NE(svg.find("<rect"), std::string::npos);
  EXPECT_EQ(svg.find("<image"), std::string::npos);
  // viewBox in points: 6 x 4 in = 432 x 288 pt.
  EXPECT_NE(svg.find("viewBox=\"0 0 432 288\""), std::string::npos);
}

TEST(Figures, LargeHeatmapEmbedsOneFullResolutionImage) {
  FigureData f = synthetic_figure(View::Heatmap);
  HeatmapData& h = f.heatmaps[0];
  const int n = 300;
  h.n_q = h.n_k = h.rows = h.cols = n;
  h.cells.assign(size_t(n) * n, 0.0f);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) h.cells[size_t(i) * n + j] = 1.0f / float(i + 1);
  h.q_labels = h.k_labels = std::vector<std::string>(size_t(n), "tok");
  const std::string dir = test::fresh_dir("svg_large");
  export_figure(f, dir + "/large.svg", kGoldenSize);
  const std::string svg = test::read_all(dir + "/large.svg");
  EXPECT_NE(svg.find("<image"), std::string::npos);
  EXPECT_NE(svg.find("data:image/png;base64"), std::string::npos);
  EXPECT_LT(svg.size(), size_t(2) << 20);
  // Token labels are thinned: far fewer than 300 per axis.
  size_t labels = 0;
  for (size_t at = svg.find(">tok<"); at != std::string::npos; at = svg.find(">tok<", at + 1))
    ++labels;
  EXPECT_GT(labels, 10u);
  EXPECT_LT(labels, 200u);
}

TEST(Figures, PdfIsOnePageOfRequestedSizeAndRendersLikeThePng) {
  if (!test::have_tool("pdfinfo") || !test::have_tool("pdftoppm"))
    GTEST_SKIP() << "poppler-utils not installed";
  const std::string dir = test::fresh_dir("pdf");
  const FigureData f = synthetic_figure(View::Variants);
  const FigureSize size{750, 450, 150};  // 5 x 3 in = 360 x 216 pt
  export_figure(f, dir + "/fig.pdf", size);
  export_figure(f, dir + "/fig.png", size);
  std::string info;
  ASSERT_EQ(test::run_command("pdfinfo '" + dir + "/fig.pdf'", &info), 0) << info;
  EXPECT_TRUE(std::regex_search(info, std::regex("Pages:\\s+1\\b"))) << info;
  EXPECT_TRUE(std::regex_search(info, std::regex("Page size:\\s+360 x 216 pts"))) << info;
  std::string log;
  ASSERT_EQ(
      test::run_command(
          "pdftoppm -r 150 -png -singlefile '" + dir + "/fig.pdf' '" + dir + "/from_pdf'", &log),
      0)
      << log;
  const QImage from_pdf(QString::fromStdString(dir + "/from_pdf.png"));
  const QImage png(QString::fromStdString(dir + "/fig.png"));
  ASSERT_EQ(from_pdf.size(), png.size());
  // Two rasterisers (poppler and Qt) differ in anti-aliasing and sub-pixel glyph placement
  // (about one pixel); compared at half resolution, where those differences average out and a
  // missing or moved element does not.
  auto half = [](const QImage& i) {
    return i.scaled(i.size() / 2, Qt::IgnoreAspectRatio, Qt::SmoothTransformation);
  };
  const test::ImageDiff d = compare_images(half(from_pdf), half(png));
  RecordProperty("pdf_vs_png_mean_abs", std::to_string(d.mean_abs));
  RecordProperty("pdf_vs_png_far_fraction", std::to_string(d.frac_far));
  EXPECT_LT(d.mean_abs, 3.5);
  EXPECT_LT(d.frac_far, 0.025);
  // And the same comparison tells different figures apart.
  export_figure(synthetic_figure(View::Heatmap), dir + "/other.png", size);
  const test::ImageDiff other =
      compare_images(half(from_pdf), half(QImage(QString::fromStdString(dir + "/other.png"))));
  RecordProperty("pdf_vs_other_mean_abs", std::to_string(other.mean_abs));
  RecordProperty("pdf_vs_other_far_fraction", std::to_string(other.frac_far));
  EXPECT_TRUE(other.mean_abs > 3.5 || other.frac_far > 0.025);
}

TEST(Figures, BadOutputsGiveClearErrors) {
  const FigureData f = synthetic_figure(View::Heatmap);
  try {
    export_figure(f, "/no/such/folder/fig.pdf", kGoldenSize);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("/no/such/folder/fig.pdf"), std::string::npos);
  }
  try {
    export_figure(f, test::fresh_dir("bad") + "/fig.jpg", kGoldenSize);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(".png, .svg or .pdf"), std::string::npos);
  }
  EXPECT_THROW(render_figure_image(f, {0, 100, 100}), Error);
  EXPECT_THROW(core::view_from_name("pie"), Error);
}

}  // namespace
}  // namespace attn

namespace attn::fig {
namespace {

TEST(FigureAxes, NiceTicksLogTicksAndThinning) {
  auto near = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::abs(a[i] - b[i]) > 1e-9 * std::max(1.0, std::abs(b[i]))) return false;
    return true;
  };
  EXPECT_TRUE(near(nice_ticks(0, 1, 6), {0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_TRUE(near(nice_ticks(0, 0.37, 5), {0, 0.1, 0.2, 0.3}));
  EXPECT_TRUE(near(nice_ticks(-3, 12, 4), {0, 5, 10}) ||
              near(nice_ticks(-3, 12, 4), {-5, 0, 5, 10}) || near(nice_ticks(-3, 12, 4), {0, 10}));
  EXPECT_TRUE(near(log_ticks(1.0000001e-4, 1.0000001), {1e-4, 1e-3, 1e-2, 1e-1, 1}));
  // 200 labels on 100 points at 7 points each: every 16th (a round stride >= 14).
  const std::vector<int> t = thinned(200, 100, 7);
  ASSERT_GE(t.size(), 2u);
  EXPECT_EQ(t[1] - t[0], 16);
  EXPECT_EQ(thinned(10, 100, 7).size(), 10u);
  EXPECT_EQ(token_label("a\nb\tc"), QString::fromUtf8("a\u21b5b\u2192c"));
  EXPECT_EQ(token_label("abcdefghijklmnop", 6), QString::fromUtf8("abcde\u2026"));
  EXPECT_EQ(tick_label(0.001), "0.001");
  EXPECT_EQ(tick_label(1e-4), QString::fromUtf8("10\u207b\u2074"));
}

TEST(FigureAxes, ColormapsAreMonotoneInLightness) {
  for (const std::string& name : {"viridis", "magma", "blues"}) {
    const Colormap& m = colormap(name);
    auto lum = [&](double t) {
      const Rgb c = m.at(t);
      return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
    };
    for (int i = 1; i <= 20; ++i)
      if (name == "blues")
        EXPECT_LT(lum(i / 20.0), lum((i - 1) / 20.0) + 1e-9) << name << " " << i;
      else
        EXPECT_GT(lum(i / 20.0), lum((i - 1) / 20.0) - 1e-9) << name << " " << i;
  }
  EXPECT_THROW(colormap("jet"), Error);
  EXPECT_DOUBLE_EQ(color_position(0.5, 1.0, false), 0.5);
  EXPECT_DOUBLE_EQ(color_position(1e-2, 1.0, true), 0.5);
  EXPECT_DOUBLE_EQ(color_position(0.0, 1.0, true), 0.0);
}

}  // namespace
}  // namespace attn::fig
