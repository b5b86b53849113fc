// Figure export: golden images per preset (synthetic data, small tolerance), SVG that parses and
// keeps text as text, a one-page PDF of the requested size that renders like the PNG export.
// Regenerate goldens with ATTN_UPDATE_GOLDENS=1 (then look at them before committing).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "app/figures/figure.h"
#include "compute/error.h"
#include "tests/app/figure_fixtures.h"
#include "tests/app/image_compare.h"

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
  const test::ImageDiff d = compare_images(from_pdf, png);
  // Two rasterisers (poppler and Qt) differ in anti-aliasing and glyph hinting only.
  EXPECT_LT(d.mean_abs, 4.0);
  EXPECT_LT(d.frac_far, 0.03);
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
  EXPECT_THROW(view_from_name("pie"), Error);
}

}  // namespace
}  // namespace attn
