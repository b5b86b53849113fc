// Figure export: golden images per preset (synthetic data, small tolerance), SVG that parses and
// keeps text as text, a one-page PDF of the requested size that renders like the PNG export, and
// the layout rule of every preset (no text cut by the page or its room, none overlapping, every
// data mark inside its axes) on short and long inputs.
// Regenerate goldens with ATTN_UPDATE_GOLDENS=1 (then look at them before committing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <tuple>

#include "app/core/decode/stream.h"
#include "app/figures/figure.h"
#include "app/figures/figure_painter.h"
#include "compute/error.h"
#include "render/colormap.h"
#include "render/number_format.h"
#include "tests/app/figure_fixtures.h"
#include "tests/app/image_compare.h"

// LeakSanitizer (asan preset): Qt's font database and fontconfig keep allocations until exit.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libfontconfig\nleak:libQt6Gui\nleak:libQt6Core\nleak:libfreetype\n";
}

namespace attn::fig {
namespace {
namespace fs = std::filesystem;
using test::compare_images;
using test::long_figure;
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

// A session may name any map of the shared table: each renders, and each looks different.
TEST(Figures, EveryColormapNameRendersAHeatmap) {
  FigureData f = synthetic_figure(View::Heatmap);
  std::vector<QImage> images;
  for (const std::string& name : render::colormap_names()) {
    f.settings.colormap = name;
    const QImage img = render_figure_image(f, kGoldenSize).convertToFormat(QImage::Format_RGB32);
    ASSERT_EQ(img.width(), kGoldenSize.width) << name;
    // The largest cell and the top of the colour bar are painted in the map's colour at 1.
    const render::Rgb8 top = render::colormap_rgb8(render::colormap_from_name(name), 1.0);
    int64_t at_top = 0;
    for (int y = 0; y < img.height(); ++y)
      for (int x = 0; x < img.width(); ++x) {
        const QRgb p = img.pixel(x, y);
        at_top += qRed(p) == top.r && qGreen(p) == top.g && qBlue(p) == top.b;
      }
    EXPECT_GT(at_top, 20) << name;
    images.push_back(img);
  }
  // Pixels that differ visibly (some channel by more than 8) between two maps' figures: magma
  // and inferno share their dark end, so most low cells look alike, but not the rest.
  auto differing = [](const QImage& a, const QImage& b) {
    int64_t n = 0;
    for (int y = 0; y < a.height(); ++y)
      for (int x = 0; x < a.width(); ++x) {
        const QRgb p = a.pixel(x, y), q = b.pixel(x, y);
        n += std::max({std::abs(qRed(p) - qRed(q)), std::abs(qGreen(p) - qGreen(q)),
                       std::abs(qBlue(p) - qBlue(q))}) > 8;
      }
    return double(n) / (double(a.width()) * a.height());
  };
  for (size_t a = 0; a < images.size(); ++a)
    for (size_t b = a + 1; b < images.size(); ++b)
      EXPECT_GT(differing(images[a], images[b]), 0.01)
          << render::colormap_names()[a] << " vs " << render::colormap_names()[b];
  f.settings.colormap = "jet";
  try {
    render_figure_image(f, kGoldenSize);
    ADD_FAILURE() << "'jet' rendered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cividis"), std::string::npos) << e.what();
  }
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

// ---- layout -----------------------------------------------------------------------------------

std::string rect_str(const QRectF& r) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "[%.1f, %.1f %.1fx%.1f]", r.left(), r.top(), r.width(),
                r.height());
  return buf;
}

// Everything wrong with a figure's layout, one line each: text cut by the page or longer than
// its room, two texts overlapping, a data mark outside its axes.
std::vector<std::string> layout_problems(const FigureLayout& l) {
  constexpr double tol = 0.05;  // points
  std::vector<std::string> out;
  auto name = [](const DrawnText& t) { return "'" + t.text.toStdString() + "'"; };
  const QRectF page = l.page.adjusted(-tol, -tol, tol, tol);
  for (const DrawnText& t : l.texts) {
    if (!page.contains(t.box))
      out.push_back(name(t) + " " + rect_str(t.box) + " is cut by the page " + rect_str(l.page));
    if (t.room >= 0 && t.length > t.room + tol)
      out.push_back(name(t) + " is " + std::to_string(t.length) + " pt long in a room of " +
                    std::to_string(t.room));
  }
  for (size_t i = 0; i < l.texts.size(); ++i)
    for (size_t j = i + 1; j < l.texts.size(); ++j) {
      const QRectF x = l.texts[i].box.intersected(l.texts[j].box);
      if (x.width() > tol && x.height() > tol)
        out.push_back(name(l.texts[i]) + " " + rect_str(l.texts[i].box) + " overlaps " +
                      name(l.texts[j]) + " " + rect_str(l.texts[j].box));
    }
  for (const DrawnMark& m : l.marks) {
    const QRectF ax = m.axes.adjusted(-tol, -tol, tol, tol);
    if (!ax.contains(m.mark.topLeft()) || !ax.contains(m.mark.bottomRight()))
      out.push_back("a data mark " + rect_str(m.mark) + " leaves its axes " + rect_str(m.axes));
  }
  return out;
}

std::string first_problems(const std::vector<std::string>& p) {
  std::string all;
  for (size_t i = 0; i < p.size() && i < 25; ++i) all += "\n  " + p[i];
  return all;
}

// The checker itself: each kind of problem is caught.
TEST(FigureLayoutCheck, CatchesCutOverlappingAndStrayMarks) {
  FigureLayout l;
  l.page = QRectF(0, 0, 100, 50);
  l.texts = {{"a", QRectF(10, 10, 20, 8), 20, -1}, {"b", QRectF(30, 10, 20, 8), 20, 20}};
  l.marks = {{QRectF(5, 5, 2, 30), QRectF(0, 0, 10, 40)}};
  EXPECT_TRUE(layout_problems(l).empty()) << first_problems(layout_problems(l));  // touching
  l.texts.push_back({"overlap", QRectF(25, 14, 10, 8), 10, -1});
  l.texts.push_back({"cut", QRectF(95, 40, 10, 8), 10, -1});
  l.texts.push_back({"long", QRectF(60, 30, 30, 8), 30, 25});
  l.marks.push_back({QRectF(5, -3, 2, 30), QRectF(0, 0, 10, 40)});
  const auto p = layout_problems(l);
  auto has = [&](const std::string& what) {
    return std::any_of(p.begin(), p.end(),
                       [&](const std::string& x) { return x.find(what) != std::string::npos; });
  };
  EXPECT_TRUE(has("'overlap'")) << first_problems(p);
  EXPECT_TRUE(has("'cut'")) << first_problems(p);
  EXPECT_TRUE(has("'long' is")) << first_problems(p);
  EXPECT_TRUE(has("leaves its axes")) << first_problems(p);
}

// Every preset, short and long input, on a page and at free heights (kLayoutSizes): every
// text box the painter draws lies on the page, within the room its layout gave it, and apart
// from every other; every bar and point lies inside its axes.
class Layout : public ::testing::TestWithParam<std::tuple<View, bool, int>> {};

// A 6 x 4 in page, and free heights 7 in and 3.5 in (a paper's column) wide.
const FigureSize kLayoutSizes[] = {kGoldenSize, {1400, 0, 200}, {700, 0, 200}};

TEST_P(Layout, NoTextIsCutOrOverlappedAndMarksStayInTheirAxes) {
  const auto [view, long_input, size_index] = GetParam();
  const FigureData f = long_input ? long_figure(view) : synthetic_figure(view);
  FigureLayout layout;
  const FigureSize size = kLayoutSizes[size_index];
  const QImage img = render_figure_image(f, size, {}, &layout);
  ASSERT_EQ(img.width(), size.width);
  EXPECT_NEAR(layout.page.width(), size.width * 72.0 / size.dpi, 1e-6);
  EXPECT_NEAR(layout.page.height(), img.height() * 72.0 / size.dpi, 1e-6);
  EXPECT_GT(layout.texts.size(), 8u);
  const std::vector<std::string> p = layout_problems(layout);
  EXPECT_TRUE(p.empty()) << p.size() << " layout problems:" << first_problems(p);
  if (size.height == 0) {  // the height fit for the content holds all of it
    for (const DrawnText& t : layout.texts)
      EXPECT_FALSE(t.text.endsWith(" more")) << t.text.toStdString();
  }
  if (std::getenv("ATTN_LAYOUT_DIR"))  // to look at them
    img.save(QString::fromStdString(std::string(std::getenv("ATTN_LAYOUT_DIR")) + "/" +
                                    view_name(view) + (long_input ? "_long_" : "_short_") +
                                    std::to_string(size_index) + ".png"));
}

INSTANTIATE_TEST_SUITE_P(
    Presets, Layout,
    ::testing::Combine(::testing::Values(View::Heatmap, View::Variants, View::Grid, View::Sinks,
                                         View::Image, View::Tradeoff, View::Tokens, View::Stream,
                                         View::Cache, View::Decode, View::Heads, View::Patch,
                                         View::Attribution, View::Qk),
                       ::testing::Bool(), ::testing::Values(0, 1, 2)),
    [](const auto& info) {
      return std::string(view_name(std::get<0>(info.param))) +
             (std::get<1>(info.param) ? "_long" : "_short") + "_size" +
             std::to_string(std::get<2>(info.param));
    });

std::vector<QString> texts_of(const FigureData& f, const FigureSize& size = kGoldenSize) {
  FigureLayout layout;
  render_figure_image(f, size, {}, &layout);
  std::vector<QString> out;
  for (const DrawnText& t : layout.texts) out.push_back(t.text);
  return out;
}

// Two different KLs: a head's attention rows against dense ("row KL") and the model's
// next-token distribution against dense ("next-token KL"). No figure says just "KL".
TEST(Figures, TheTwoKlsAreNamedApart) {
  std::vector<QString> all = texts_of(synthetic_figure(View::Variants));
  FigureData t = synthetic_figure(View::Tradeoff);
  t.settings.tradeoff_y = "row_kl";
  for (auto& p : t.tradeoff) p.row_kl = p.rel_error * 2;
  for (const QString& x : texts_of(t)) all.push_back(x);
  int row = 0, next = 0;
  for (const QString& x : all) {
    if (!x.contains("KL")) continue;
    const bool named = x.contains("row KL", Qt::CaseInsensitive) ||
                       x.contains("next-token KL", Qt::CaseInsensitive);
    EXPECT_TRUE(named) << x.toStdString();
    row += x.contains("row KL", Qt::CaseInsensitive);
    next += x.contains("next-token KL", Qt::CaseInsensitive);
  }
  EXPECT_GT(row, 1);   // heatmap metrics and the trade-off's first panel
  EXPECT_EQ(next, 1);  // the trade-off's second panel
}

// A log error axis drops nothing: points of error 0 (dense itself, an exact variant) sit at the
// "0" of a symlog axis, and the axis says so.
TEST(Figures, TradeoffDrawsPointsOfErrorZero) {
  const FigureData f = long_figure(View::Tradeoff);
  FigureLayout layout;
  render_figure_image(f, kGoldenSize, {}, &layout);
  EXPECT_EQ(layout.marks.size(), 2 * f.tradeoff.size());  // two panels, every point in each
  bool symlog = false;
  for (const DrawnText& t : layout.texts) symlog = symlog || t.text.contains("(symlog)");
  EXPECT_TRUE(symlog);
}

// A sweep over precisions draws each precision as its own series, named in the legend (the
// bf16 points once shared the f32 series' line and legend entry).
TEST(Figures, TradeoffNamesEachPrecisionInTheLegend) {
  FigureData f = synthetic_figure(View::Tradeoff);
  const size_t n = f.tradeoff.size();
  for (size_t i = 0; i < n; ++i) {
    TradeoffPoint p = f.tradeoff[i];
    p.precision = "bf16";
    p.rel_error *= 1.01;
    f.tradeoff.push_back(p);
  }
  int f32 = 0, bf16 = 0;
  for (const QString& x : texts_of(f)) {
    if (x.startsWith(QString::fromStdString(f.tradeoff.front().pattern))) {
      (x.contains("bf16") ? bf16 : f32) += 1;
    }
  }
  EXPECT_GE(f32, 1);
  EXPECT_GE(bf16, 1);
}

// Every grid panel is drawn, however many variants the session has (it once stopped at four).
TEST(Figures, GridDrawsEveryPanel) {
  const FigureData f = long_figure(View::Grid);
  ASSERT_EQ(f.grids.size(), 6u);
  int heads = 0;
  for (const QString& t : texts_of(f)) heads += t == "Head";
  EXPECT_EQ(heads, 6);
}

TEST(FigureAxes, TicksAreRoundAndAxesHoldTheData) {
  // Steps are 1, 2 or 5 x 10^k (never 2.5, never 0.263/0.525/0.788), and the ticks cover the
  // data: the last is at or above the largest value.
  for (double hi : {0.37, 1.05, 0.0123, 3.7, 12.0, 0.8, 250.0, 1.0})
    for (int n = 2; n <= 6; ++n) {
      const std::vector<double> t = cover_ticks(0, hi, n);
      ASSERT_GE(t.size(), 2u) << hi << " " << n;
      EXPECT_LE(int(t.size()), n) << hi << " " << n;
      EXPECT_LE(t.front(), 0.0);
      EXPECT_GE(t.back(), hi * (1 - 1e-12)) << hi << " " << n;
      const double step = t[1] - t[0];
      const double m = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
      EXPECT_TRUE(std::abs(m - 1) < 1e-6 || std::abs(m - 2) < 1e-6 || std::abs(m - 5) < 1e-6)
          << "step " << step << " for " << hi << " " << n;
    }
  auto near = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::abs(a[i] - b[i]) > 1e-9 * std::max(1.0, std::abs(b[i]))) return false;
    return true;
  };
  EXPECT_TRUE(near(cover_ticks(0, 0.37, 3), {0, 0.2, 0.4}));  // the sinks axis once ended at 0.2
  EXPECT_TRUE(near(cover_ticks(0, 1.05, 4), {0, 0.5, 1, 1.5}));
  EXPECT_TRUE(near(nice_ticks(0, 0.75, 5), {0, 0.2, 0.4, 0.6}));  // not 0.25 steps
  EXPECT_EQ(tick_label(0.2), "0.2");
}

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

// The one colour-map table (render/colormap.h) that the figures and the renderer share.
TEST(Colormaps, NamesLookUpBothWaysAndUnknownNamesListThemAll) {
  EXPECT_EQ(render::colormap_names(),
            (std::vector<std::string>{"viridis", "magma", "inferno", "plasma", "cividis", "gray",
                                      "blues", "diverging"}));
  ASSERT_EQ(int(render::colormap_names().size()), render::kColormapCount);
  for (int i = 0; i < render::kColormapCount; ++i) {
    const render::Colormap c = render::Colormap(i);
    EXPECT_EQ(render::colormap_from_name(render::colormap_name(c)), c);
    EXPECT_EQ(render::colormap_name(c), render::colormap_names()[size_t(i)]);
  }
  try {
    render::colormap_from_name("jet");
    ADD_FAILURE() << "no error for 'jet'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    const std::string m = e.what();
    EXPECT_NE(m.find("'jet'"), std::string::npos) << m;
    for (const std::string& n : render::colormap_names())
      EXPECT_NE(m.find(n), std::string::npos) << n << " missing from: " << m;
  }
}

TEST(Colormaps, EndpointsAndMidpointsMatchThePublishedMaps) {
  // 0xRRGGBB at t = 0, 0.5, 1: matplotlib's viridis, magma, inferno, plasma, cividis (the middle
  // is its entry 128, which the anchors straddle), ColorBrewer's Blues and RdBu (reversed).
  struct Want {
    const char* name;
    uint32_t lo, mid, hi;
    int mid_tol;
  };
  const Want want[] = {
      {"viridis", 0x440154, 0x21918c, 0xfde725, 2}, {"magma", 0x000004, 0xb73779, 0xfcfdbf, 2},
      {"inferno", 0x000004, 0xbc3754, 0xfcffa4, 2}, {"plasma", 0x0d0887, 0xcc4778, 0xf0f921, 2},
      {"cividis", 0x00224e, 0x7d7c78, 0xfee838, 2}, {"gray", 0xffffff, 0x808080, 0x000000, 1},
      {"blues", 0xf7fbff, 0x6baed6, 0x08306b, 0},   {"diverging", 0x053061, 0xf7f7f7, 0x67001f, 0},
  };
  auto rgb8 = [](uint32_t c) {
    return render::Rgb8{uint8_t(c >> 16), uint8_t(c >> 8), uint8_t(c)};
  };
  for (const Want& w : want) {
    const render::Colormap c = render::colormap_from_name(w.name);
    EXPECT_EQ(render::colormap_rgb8(c, 0.0), rgb8(w.lo)) << w.name;
    EXPECT_EQ(render::colormap_rgb8(c, 1.0), rgb8(w.hi)) << w.name;
    const render::Rgb8 m = render::colormap_rgb8(c, 0.5), e = rgb8(w.mid);
    EXPECT_NEAR(m.r, e.r, w.mid_tol) << w.name;
    EXPECT_NEAR(m.g, e.g, w.mid_tol) << w.name;
    EXPECT_NEAR(m.b, e.b, w.mid_tol) << w.name;
    // Float colours agree with the u8 ones; t is clamped and NaN is the low end.
    const render::Rgb f = render::colormap_rgb(c, 1.0);
    EXPECT_NEAR(f.r * 255.f, float(rgb8(w.hi).r), 1e-3f) << w.name;
    EXPECT_NEAR(f.g * 255.f, float(rgb8(w.hi).g), 1e-3f) << w.name;
    EXPECT_NEAR(f.b * 255.f, float(rgb8(w.hi).b), 1e-3f) << w.name;
    EXPECT_EQ(render::colormap_rgb8(c, 7.0), rgb8(w.hi)) << w.name;
    EXPECT_EQ(render::colormap_rgb8(c, -1.0), rgb8(w.lo)) << w.name;
    EXPECT_EQ(render::colormap_rgb8(c, std::nan("")), rgb8(w.lo)) << w.name;
    // Vector gradients use the anchors: first and last are the endpoints.
    const std::vector<render::Rgb8> stops = render::colormap_stops(c);
    ASSERT_GE(stops.size(), 2u);
    EXPECT_EQ(stops.front(), rgb8(w.lo));
    EXPECT_EQ(stops.back(), rgb8(w.hi));
  }
  // ImGui packing 0xAABBGGRR.
  EXPECT_EQ(render::colormap_u32(render::Colormap::Viridis, 1.0, 128), 0x8025e7fdu);
}

TEST(Colormaps, SequentialMapsAreMonotoneInLightness) {
  for (const std::string& name : render::colormap_names()) {
    if (name == "diverging") continue;
    const render::Colormap m = render::colormap_from_name(name);
    const bool falling = name == "gray" || name == "blues";  // light background at zero
    auto lum = [&](double t) {
      const render::Rgb c = render::colormap_rgb(m, t);
      return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
    };
    for (int i = 1; i <= 50; ++i)
      if (falling)
        EXPECT_LT(lum(i / 50.0), lum((i - 1) / 50.0) + 1e-9) << name << " " << i;
      else
        EXPECT_GT(lum(i / 50.0), lum((i - 1) / 50.0) - 1e-9) << name << " " << i;
  }
}

TEST(Colormaps, LookupTextureHasOneRowPerMap) {
  const std::vector<uint8_t> lut = render::colormap_lut_rgba8();
  ASSERT_EQ(lut.size(), size_t(render::kColormapCount) * 256 * 4);
  for (int row = 0; row < render::kColormapCount; ++row)
    for (int i : {0, 77, 128, 255}) {
      const uint8_t* p = &lut[(size_t(row) * 256 + size_t(i)) * 4];
      const render::Rgb8 want = render::colormap_rgb8(render::Colormap(row), i / 255.0);
      EXPECT_EQ(render::Rgb8({p[0], p[1], p[2]}), want) << row << " " << i;
      EXPECT_EQ(p[3], 255);
    }
  EXPECT_DOUBLE_EQ(render::color_position(0.5, 1.0, false), 0.5);
  EXPECT_DOUBLE_EQ(render::color_position(1e-2, 1.0, true), 0.5);
  EXPECT_DOUBLE_EQ(render::color_position(0.0, 1.0, true), 0.0);
  EXPECT_DOUBLE_EQ(render::color_position(2.0, 1.0, false), 1.0);
}

// ---- what no colour map shows, and numbers as figures print them -----------------------------

int count_pixels(const QImage& img, QColor want, int tol = 0) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) {
      const QColor c = img.pixelColor(x, y);
      n += std::abs(c.red() - want.red()) <= tol && std::abs(c.green() - want.green()) <= tol &&
           std::abs(c.blue() - want.blue()) <= tol;
    }
  return n;
}

bool any_text(const std::vector<QString>& texts, const QString& part) {
  return std::any_of(texts.begin(), texts.end(),
                     [&](const QString& t) { return t.contains(part); });
}

// Dropped entries once took the map's lowest colour and read as small probabilities: they have a
// colour no sequential map has, and the legend says what it means.
TEST(Figures, DroppedEntriesAreDrawnOutsideTheColourMapWithALegend) {
  for (int m = 0; m < render::kColormapCount; ++m) {
    if (render::Colormap(m) == render::Colormap::Diverging) continue;
    for (int i = 0; i <= 255; ++i) {
      const render::Rgb8 c = render::colormap_rgb8(render::Colormap(m), i / 255.0);
      const double d = std::hypot(double(c.r) - kDropped.red(), double(c.g) - kDropped.green(),
                                  double(c.b) - kDropped.blue());
      EXPECT_GT(d, 60) << render::colormap_name(render::Colormap(m)) << " at " << i;
    }
  }
  const FigureData f = synthetic_figure(View::Variants);
  ASSERT_FALSE(f.heatmaps.back().dropped.empty());
  const QImage img = render_figure_image(f, kGoldenSize);
  EXPECT_GT(count_pixels(img, kDropped), 200) << "no cell is drawn in the dropped colour";
  EXPECT_TRUE(any_text(texts_of(f), "dropped by the variant"));
  // Without dropped cells, nothing takes that colour (it is no probability).
  FigureData none = f;
  for (auto& h : none.heatmaps) h.dropped.clear();
  EXPECT_EQ(count_pixels(render_figure_image(none, kGoldenSize), kDropped), 0);
}

// The decode figure's evicted and future cells were near-identical greys.
TEST(Figures, DecodeFigureTellsEvictedFromFutureCells) {
  const FigureData f = synthetic_figure(View::Decode);
  const QImage img = render_figure_image(f, kGoldenSize);
  EXPECT_GT(count_pixels(img, kDropped), 100) << "evicted cells";
  EXPECT_GT(count_pixels(img, kHidden), 100) << "future cells";
  const auto texts = texts_of(f);
  EXPECT_TRUE(any_text(texts, "evicted (not in the cache)"));
  EXPECT_TRUE(any_text(texts, "after the query"));
}

// Over 7,000 tokens a cell pools ~18 of them and four sinks vanished into their cell's fraction:
// tokens held through every pass are drawn at least 1.5 pt wide and marked, at any length.
TEST(Figures, CacheTimelineShowsSinksAtAnyLength) {
  // The core finds them: the first 4 tokens stay through every pass, a window of 8 slides.
  core::StreamResult r;
  r.model = "m";
  const int T = 7000;
  r.ids.assign(size_t(T), 1);
  core::PolicyRun run;
  run.spec = "kv_streaming(sinks=4,window=8)";
  for (int s = 0; s < T; ++s) {
    models::KvSnapshot snap;
    snap.step = s;
    std::vector<int32_t> kept;
    for (int t = 0; t <= s; ++t)
      if (t < 4 || t > s - 8) kept.push_back(t);
    snap.kept = {{kept}};
    run.history.push_back(std::move(snap));
  }
  r.runs.push_back(std::move(run));
  const FigureData f = core::cache_figure(r, 0, 0);
  ASSERT_EQ(f.cache.panels.size(), 1u);
  EXPECT_EQ(f.cache.panels[0].persistent, (std::vector<int>{0, 1, 2, 3}));
  // Drawn: the top colour of the map fills a sink column down the whole panel.
  FigureData without = f;
  without.cache.panels[0].persistent.clear();
  const render::Rgb8 top = render::colormap_rgb8(render::Colormap::Viridis, 1.0);
  const QColor held(top.r, top.g, top.b);
  const int with_n = count_pixels(render_figure_image(f, kGoldenSize), held, 2);
  const int without_n = count_pixels(render_figure_image(without, kGoldenSize), held, 2);
  EXPECT_GT(with_n, without_n + 150) << with_n << " vs " << without_n;
  EXPECT_TRUE(any_text(texts_of(f), "held through every pass"));
}

// kv_full stops at the context (256 tokens) while the others read 7,040: each policy says how
// many tokens its curve and its whole-stream perplexity cover.
TEST(Figures, StreamFigureLabelsEachCurveWithItsLength) {
  const FigureData f = synthetic_figure(View::Stream);
  const auto texts = texts_of(f, {1200, 500, 100});
  EXPECT_TRUE(any_text(texts, "256 tokens, stopped at the context"));
  EXPECT_TRUE(any_text(texts, "600 tokens)"));
  EXPECT_TRUE(any_text(texts, "over 256 tokens"));
  EXPECT_TRUE(any_text(texts, "all the tokens it read"));
}

// "-0.00" and "3.1e-13" where 0 is meant.
TEST(NumberFormat, ZeroBelowTheResolutionAndNoNegativeZero) {
  EXPECT_EQ(render::format_fixed(-0.001, 2), "0.00");
  EXPECT_EQ(render::format_fixed(-0.4, 0), "0");
  EXPECT_EQ(render::format_fixed(-0.02, 2), "-0.02");
  EXPECT_EQ(render::format_fixed(0.004, 2, 0.01), "0.00");
  EXPECT_EQ(render::format_number(3.1e-13), "0");
  EXPECT_EQ(render::format_number(-2e-12), "0");
  EXPECT_EQ(render::format_number(-0.0), "0");
  EXPECT_EQ(render::format_number(0.0123), "0.0123");
  EXPECT_EQ(render::format_number(1.5e-5), "1.5e-05");
  EXPECT_EQ(render::format_number(0.013, 2, 0.1), "0");
  EXPECT_EQ(render::format_number(std::nan("")), "nan");
  EXPECT_EQ(tick_label(3.1e-13).toStdString(), "0");
  EXPECT_EQ(tick_label(-1e-14).toStdString(), "0");
  const render::ValueRange vr = render::value_range({0.0f, 3.1e-13f, 0.2f});
  EXPECT_EQ(vr.lo_label, "0");
  // Cells of a value grid: a loss rise of -0.001 reads 0.00.
  FigureData g = synthetic_figure(View::Heads);
  ASSERT_FALSE(g.values.panels.empty());
  for (auto& p : g.values.panels)
    for (float& v : p.values) v = -0.001f;
  for (const QString& t : texts_of(g, {1200, 900, 100}))
    EXPECT_FALSE(t.contains("-0.00")) << t.toStdString();
}

// A heatmap panel's title names the head's own numbers and its sinks (core::heatmap_header),
// as the app's panel header and `analyze --json` do.
TEST(Figures, HeatmapPanelTitlesAreTheHeadsOwnHeader) {
  const FigureData f = synthetic_figure(View::Variants);
  const auto texts = texts_of(f);
  for (const auto& h : f.heatmaps)
    for (const std::string& seg : core::heatmap_header(h))
      EXPECT_TRUE(any_text(texts, QString::fromStdString(seg))) << seg;
  EXPECT_TRUE(any_text(texts, "1 sink"));
}

}  // namespace
}  // namespace attn::fig
