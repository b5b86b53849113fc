// GUI tests of the secondary views' layout: the real application (Qt main window, Vulkan view on
// lavapipe under Xvfb, the default models), checked through the canvas's record of where it put
// texts and boxes (Canvas::marks) and through the pixels of the swapchain. Screenshots go to
// $ATTNSCOPE_SCREENSHOT_DIR or the working directory.
#include <gtest/gtest.h>
#include <imgui.h>

#include <QApplication>
#include <QComboBox>
#include <QMouseEvent>
#include <QTabWidget>
#include <QVersionNumber>
#include <QVulkanInstance>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "app/core/analysis/analysis.h"
#include "app/gui/decode_dialog.h"
#include "app/gui/decode_steps.h"
#include "app/gui/input_dock.h"
#include "app/gui/main_window.h"
#include "app/gui/variant_slot.h"
#include "app/gui/variants_dock.h"
#include "app/gui/vulkan_view.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "gui_driver.h"
#include "gui_test_main.h"
#include "models/arch/default_models.h"
#include "render/canvas.h"
#include "render/draw_util.h"

namespace attn::gui::test {
namespace {

using Mark = render::Canvas::Mark;

QVulkanInstance* g_instance = nullptr;
const char* kCat = "The cat sat on the mat. The cat sat on the mat.";

// Shows the window and waits until the analysis, its metrics and the trade-off sweep are in.
::testing::AssertionResult show_settled(MainWindow& w) {
  w.view()->setVulkanInstance(g_instance);
  w.show();
  if (!wait_until([&] { return w.view()->frames_drawn() > 0; }, 20000))
    return ::testing::AssertionFailure() << "no frame";
  if (!wait_until([&] { return w.worker_idle() || !w.last_error().isEmpty(); }, 120000))
    return ::testing::AssertionFailure() << "the worker never went idle";
  if (!w.last_error().isEmpty())
    return ::testing::AssertionFailure() << w.last_error().toStdString();
  if (!wait_settled(w, 60000, 3)) return ::testing::AssertionFailure() << "not settled";
  return ::testing::AssertionSuccess();
}

// Switches the view (or leaves it) and lets a few frames settle.
void show_view(MainWindow& w, render::ViewKind v) {
  w.set_view(v);
  w.view()->redraw();
  ASSERT_TRUE(wait_settled(w, 30000, 3));
}

void move_mouse(MainWindow& w, QPointF at) {
  QMouseEvent mv(QEvent::MouseMove, at, w.view()->mapToGlobal(at), Qt::NoButton, Qt::NoButton,
                 Qt::NoModifier);
  QCoreApplication::sendEvent(w.view(), &mv);
  w.view()->redraw();
  wait_settled(w, 10000, 3);
}

std::vector<Mark> marks(MainWindow& w, const std::string& kind) {
  std::vector<Mark> out;
  for (const Mark& m : w.view()->canvas()->marks())
    if (m.kind == kind) out.push_back(m);
  return out;
}

bool intersect(const Mark& a, const Mark& b) {
  return a.x0 < b.x1 - 0.5f && b.x0 < a.x1 - 0.5f && a.y0 < b.y1 - 0.5f && b.y0 < a.y1 - 0.5f;
}

std::string overflows(MainWindow& w) {
  std::string all;
  for (const std::string& t : w.view()->canvas()->text_overflows()) all += "\n  " + t;
  return all;
}

// WCAG contrast ratio of two sRGB colours (1 to 21).
double luminance(double r, double g, double b) {
  auto lin = [](double c) {
    c /= 255;
    return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}
double contrast(double la, double lb) {
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

// Ticks are multiples of one step that is 1, 2 or 5 times a power of ten.
void expect_round_ticks(const std::vector<Mark>& ticks, const std::string& axis) {
  ASSERT_GE(ticks.size(), 3u) << axis;
  std::vector<double> v;
  for (const Mark& t : ticks) v.push_back(std::stod(t.text));
  std::sort(v.begin(), v.end());
  const double step = v[1] - v[0];
  ASSERT_GT(step, 0) << axis;
  const double e = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const double m = step / e;
  EXPECT_TRUE(std::abs(m - 1) < 1e-6 || std::abs(m - 2) < 1e-6 || std::abs(m - 5) < 1e-6)
      << axis << " tick step " << step;
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_NEAR(v[i] / step, std::round(v[i] / step), 1e-6) << axis << " tick " << v[i];
    if (i) {
      EXPECT_NEAR(v[i] - v[i - 1], step, step * 1e-6) << axis;
    }
  }
}

// Sinks: the token labels sit right under the bars, and the hover box, beside the cursor, stays
// off them and inside the view.
TEST(GuiViews, SinksLabelsSitUnderTheBarsAndTheHoverBoxKeepsOffThem) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  for (const std::string& text : {std::string(kCat), std::string()}) {
    GuiOptions o = base_options();
    o.text = text;  // empty: the bundled sample (about 190 tokens: rotated, thinned labels)
    MainWindow w(o);
    ASSERT_TRUE(show_settled(w));
    show_view(w, render::ViewKind::Sinks);
    auto bars = marks(w, "sinks.bars"), labels = marks(w, "sinks.labels");
    ASSERT_EQ(bars.size(), 1u);
    ASSERT_EQ(labels.size(), 1u);
    const float gap = labels[0].y0 - bars[0].y1;
    std::printf("[views] %d tokens: labels %.0f px under the bars, %.0f px tall\n",
                w.analysis()->n_tokens(), gap, labels[0].y1 - labels[0].y0);
    EXPECT_GE(gap, 0) << "labels over the bars";
    EXPECT_LE(gap, 8) << "labels far from the bars";
    EXPECT_EQ(overflows(w), "");

    // Hover the lowest bars near the right edge and in the middle.
    const float vw = float(w.view()->width()), vh = float(w.view()->height());
    for (float fx : {0.5f, 0.97f}) {
      const QPointF at(bars[0].x0 + (bars[0].x1 - bars[0].x0) * fx, bars[0].y1 - 4);
      move_mouse(w, at);
      const auto hover = marks(w, "sinks.hover");
      ASSERT_EQ(hover.size(), 1u) << "no hover box at x " << at.x();
      const Mark& h = hover[0];
      const auto now_labels = marks(w, "sinks.labels");
      ASSERT_EQ(now_labels.size(), 1u);
      EXPECT_FALSE(intersect(h, now_labels[0]))
          << "hover box (" << h.x0 << ", " << h.y0 << ", " << h.x1 << ", " << h.y1
          << ") covers the labels (" << now_labels[0].y0 << " to " << now_labels[0].y1 << ")";
      EXPECT_TRUE(at.x() < h.x0 || at.x() > h.x1) << "hover box under the cursor, not beside it";
      EXPECT_GE(h.x0, 0);
      EXPECT_GE(h.y0, 0);
      EXPECT_LE(h.x1, vw);
      EXPECT_LE(h.y1, vh);
      EXPECT_EQ(overflows(w), "");
    }
    w.view()->grab_rgba().save(
        screenshot_path(text.empty() ? "views_sinks_long.png" : "views_sinks_short.png"));
  }
}

// Trade-off: labels never overlap (dense and a variant at density 1 share one), the legend names
// the coloured and the grey points, and ticks fall on 1-2-5 steps, for every choice of axes.
TEST(GuiViews, TradeoffLabelsApartLegendAndRoundTicks) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  // window(size=1024) keeps everything on this input: it lands on dense.
  o.variants = {"window(size=1024)", "top_p(block=16,p=0.9)", "block_topk(block=16,k=4)",
                "window(size=4)"};
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  show_view(w, render::ViewKind::Tradeoff);
  for (int x = 0; x < 2; ++x)
    for (int y = 0; y < 3; ++y) {
      w.view()->canvas()->settings().tradeoff_x = x;
      w.view()->canvas()->settings().tradeoff_y = y;
      w.view()->redraw();
      ASSERT_TRUE(wait_settled(w, 30000, 3));
      const std::string where = "x " + std::to_string(x) + ", y " + std::to_string(y);
      const auto labels = marks(w, "tradeoff.label");
      ASSERT_FALSE(labels.empty()) << where;
      for (size_t i = 0; i < labels.size(); ++i)
        for (size_t j = 0; j < i; ++j)
          EXPECT_FALSE(intersect(labels[i], labels[j]))
              << where << ": '" << labels[i].text << "' over '" << labels[j].text << "'";
      // Every variant is named by a label, alone or as one of a cluster ("dense (+1)").
      int named = 0;
      for (const Mark& l : labels) {
        const size_t plus = l.text.rfind(" (+");
        named += plus == std::string::npos ? 1 : 1 + std::stoi(l.text.substr(plus + 3));
      }
      EXPECT_EQ(named, 5) << where;
      expect_round_ticks(marks(w, "tradeoff.xtick"), where + " x");
      expect_round_ticks(marks(w, "tradeoff.ytick"), where + " y");
      std::string legend;
      for (const Mark& m : marks(w, "tradeoff.legend")) legend += m.text + "|";
      EXPECT_NE(legend.find("variants"), std::string::npos) << legend;
      EXPECT_NE(legend.find("automatic sweep"), std::string::npos) << legend;
      EXPECT_EQ(overflows(w), "") << where;
      if (x == 0 && y == 0) w.view()->grab_rgba().save(screenshot_path("views_tradeoff.png"));
    }
  // At density 1 dense and window(size=1024) coincide: one label says so.
  w.view()->canvas()->settings().tradeoff_x = 0;
  w.view()->canvas()->settings().tradeoff_y = 0;
  w.view()->redraw();
  ASSERT_TRUE(wait_settled(w, 30000, 3));
  bool cluster = false;
  for (const Mark& l : marks(w, "tradeoff.label"))
    cluster |= l.text.find(" (+1)") != std::string::npos;
  EXPECT_TRUE(cluster) << "dense and window(size=1024) should share one label";
}

// Image view: rollout (dense only) is one panel with a caption saying why; per-head images are
// labelled with their head.
TEST(GuiViews, ImageRolloutIsOneCaptionedPanelAndHeadsAreLabelled) {
  if (!have_model("default-vision")) GTEST_SKIP() << "default-vision model not found";
  const std::string img = sample_image();
  if (img.empty()) GTEST_SKIP() << "no sample image";
  GuiOptions o = base_options();
  o.model = "default-vision";
  o.image = img;
  o.variants = {"window(size=8)", "block_topk(block=8,k=2)"};
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  show_view(w, render::ViewKind::Image);
  const int panels = int(w.analysis()->panels.size());
  const int heads = w.analysis()->n_heads();
  ASSERT_GE(panels, 3);

  w.view()->canvas()->settings().image_mode = 2;
  w.view()->redraw();
  ASSERT_TRUE(wait_settled(w, 30000, 3));
  EXPECT_EQ(marks(w, "image.panel").size(), 1u) << "rollout is one map (dense only)";
  std::string caption;
  for (const Mark& m : marks(w, "image.caption")) caption += m.text + " ";
  EXPECT_NE(caption.find("dense model only"), std::string::npos) << caption;
  EXPECT_EQ(overflows(w), "");
  w.view()->grab_rgba().save(screenshot_path("views_image_rollout.png"));

  w.view()->canvas()->settings().image_mode = 0;
  w.view()->redraw();
  ASSERT_TRUE(wait_settled(w, 30000, 3));
  const auto images = marks(w, "image.panel");
  const auto head_labels = marks(w, "image.head_label");
  ASSERT_EQ(int(images.size()), panels * heads);
  ASSERT_EQ(images.size(), head_labels.size());
  for (size_t i = 0; i < images.size(); ++i) {
    EXPECT_EQ(head_labels[i].text, "head " + std::to_string(int(i) % heads));
    EXPECT_NEAR(head_labels[i].x0, images[i].x0, 1) << "label not over its image";
    EXPECT_LE(head_labels[i].y1, images[i].y0 + 0.5f);
    EXPECT_GE(head_labels[i].y1, images[i].y0 - 10);
  }
  EXPECT_EQ(overflows(w), "");
  w.view()->grab_rgba().save(screenshot_path("views_image_heads.png"));

  w.view()->canvas()->settings().image_mode = 1;
  w.view()->redraw();
  ASSERT_TRUE(wait_settled(w, 30000, 3));
  EXPECT_EQ(int(marks(w, "image.panel").size()), panels);
}

// Lost-mass strips and dim texts (legends, captions) stand out from the background in both themes.
TEST(GuiViews, LostMassStripsAndDimTextsHaveContrastInBothThemes) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.variants = {"window(size=2)", "top_p(block=16,p=0.5)"};
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  for (bool dark : {false, true}) {
    w.set_dark(dark);
    ASSERT_TRUE(wait_settled(w, 30000, 3));
    float bg[4];
    w.view()->canvas()->clear_color(bg);
    const double lbg = luminance(bg[0] * 255, bg[1] * 255, bg[2] * 255);
    const ImVec4 dim = ImGui::GetStyle().Colors[ImGuiCol_TextDisabled];
    const double dim_c = contrast(luminance(dim.x * 255, dim.y * 255, dim.z * 255), lbg);
    EXPECT_GE(dim_c, 4.5) << (dark ? "dark" : "light") << ": dim text contrast " << dim_c;
    const QImage img = w.view()->grab_rgba();
    img.save(screenshot_path(dark ? "views_strips_dark.png" : "views_strips_light.png"));
    const auto strips = marks(w, "heat.lost_mass");
    ASSERT_EQ(strips.size(), 2u);
    // window(size=2) drops nearly all mass of the later rows: its strongest shade shows.
    for (const Mark& s : strips) {
      if (s.text != "window(size=2)") continue;
      double best = 1;
      for (int y = int(s.y0) + 1; y < int(s.y1) - 1; ++y)
        for (int x = int(s.x0) + 2; x < int(s.x1) - 2; ++x) {
          const QRgb p = img.pixel(x, y);
          best = std::max(best, contrast(luminance(qRed(p), qGreen(p), qBlue(p)), lbg));
        }
      std::printf("[views] %s theme: '%s' strip contrast %.2f, dim text %.2f\n",
                  dark ? "dark" : "light", s.text.c_str(), best, dim_c);
      EXPECT_GE(best, 4.5) << (dark ? "dark" : "light") << " theme: strip of " << s.text;
    }
  }
}

// Newline tokens showed as "?" in the Tokens and Sinks views: their label "\u21b5" had no glyph in
// the font's ranges. Every character of every label drawn there now has one (or the label
// spells it in ASCII), and the newline reads as a newline.
TEST(GuiViews, NewlineTokensReadAsNewlinesInTokensAndSinks) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = "The cat sat.\nThe mat was warm.\nThe end.";
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  const ImFont* font = ImGui::GetIO().Fonts->Fonts[0];
  ASSERT_NE(font, nullptr);
  // Code points of a UTF-8 string.
  auto code_points = [](const std::string& s) {
    std::vector<unsigned> out;
    for (size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      unsigned cp = n == 1 ? c : c & (0xFF >> (n + 1));
      for (int k = 1; k < n && i + size_t(k) < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + size_t(k)]) & 0x3F);
      out.push_back(cp);
      i += size_t(n);
    }
    return out;
  };
  for (const auto& [view, kind] : {std::pair{render::ViewKind::Tokens, "tokens.label"},
                                   std::pair{render::ViewKind::Sinks, "sinks.label"}}) {
    show_view(w, view);
    const auto shown = marks(w, kind);
    ASSERT_FALSE(shown.empty()) << kind;
    int newlines = 0;
    for (const Mark& m : shown) {
      EXPECT_EQ(m.text.find('\n'), std::string::npos) << kind;
      for (unsigned cp : code_points(m.text))
        EXPECT_NE(font->FindGlyphNoFallback(ImWchar(cp)), nullptr)
            << kind << ": no glyph for U+" << std::hex << cp << " in '" << m.text << "'";
      newlines +=
          m.text.find("\u21b5") != std::string::npos || m.text.find("\\n") != std::string::npos;
    }
    EXPECT_GE(newlines, 1) << kind;
    w.view()->grab_rgba().save(screenshot_path(
        view == render::ViewKind::Tokens ? "views_newline_tokens.png" : "views_newline_sinks.png"));
  }
}

// Heatmap axes: a short input shows its tokens on both axes at default zoom, labels apart.
TEST(GuiViews, HeatmapAxesShowTokensOnShortInputs) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  {
    GuiOptions o = base_options();
    o.text = kCat;
    MainWindow w(o);
    ASSERT_TRUE(show_settled(w));
    show_view(w, render::ViewKind::Heatmaps);
    const auto& labels = w.analysis()->labels;
    const auto rows = marks(w, "heat.row_label"), cols = marks(w, "heat.col_label");
    w.view()->grab_rgba().save(screenshot_path("views_heatmap_labels.png"));
    ASSERT_EQ(rows.size(), labels.size()) << "row labels not shown at default zoom";
    ASSERT_EQ(cols.size(), labels.size()) << "column labels not shown at default zoom";
    for (size_t i = 0; i < labels.size(); ++i) {
      EXPECT_EQ(rows[i].text, render::clip_label(labels[i], 10));
      EXPECT_EQ(cols[i].text, render::clip_label(labels[i], 9));
      if (i) {
        EXPECT_LE(rows[i - 1].y1, rows[i].y0 + 1) << "row labels " << i - 1 << " and " << i;
        EXPECT_LE(cols[i - 1].x1, cols[i].x0 + 1) << "column labels " << i - 1 << " and " << i;
      }
      // Labels are readable: at least 70% of the font.
      EXPECT_GE(rows[i].y1 - rows[i].y0, 0.7f * 13);
    }
    EXPECT_EQ(overflows(w), "");
    // The panels still fill their cells: labels did not squeeze the heatmap.
    const auto rects = w.view()->canvas()->panel_rects();
    ASSERT_FALSE(rects.empty());
    EXPECT_GT(rects[0][2] - rects[0][0], 150);
    EXPECT_GT(rects[0][3] - rects[0][1], 150);
  }  // one window at a time (one ImGui context)

  // Three sentences (27 tokens): the rows still show their tokens.
  GuiOptions o3 = base_options();
  o3.text = std::string(kCat) + " The cat sat on the mat.";
  MainWindow w3(o3);
  ASSERT_TRUE(show_settled(w3));
  const auto rows3 = marks(w3, "heat.row_label"), cols3 = marks(w3, "heat.col_label");
  std::printf("[views] %d tokens: %zu row labels, %zu column labels; panel %.0f x %.0f px\n",
              w3.analysis()->n_tokens(), rows3.size(), cols3.size(),
              w3.view()->canvas()->panel_rects()[0][2] - w3.view()->canvas()->panel_rects()[0][0],
              w3.view()->canvas()->panel_rects()[0][3] - w3.view()->canvas()->panel_rects()[0][1]);
  EXPECT_EQ(int(rows3.size()), w3.analysis()->n_tokens());
  EXPECT_EQ(overflows(w3), "");
  w3.view()->grab_rgba().save(screenshot_path("views_heatmap_labels_27.png"));
}

// The input dock's hover text names a token as the views do ("sat", not the piece "Ġsat").
TEST(GuiViews, InputDockTooltipUsesTheViewsLabels) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kCat;
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  const auto a = w.analysis();
  ASSERT_EQ(a->tokens.size(), a->labels.size());
  int byte_level = 0;
  for (size_t t = 0; t < a->tokens.size(); ++t) {
    const std::string tip = w.input_dock()->token_tooltip(int(t)).toStdString();
    EXPECT_NE(tip.find("'" + a->labels[t] + "'"), std::string::npos) << tip;
    EXPECT_EQ(tip.find("\xC4\xA0"), std::string::npos) << "byte-level piece shown: " << tip;
    byte_level += a->tokens[t].piece.rfind("\xC4\xA0", 0) == 0;
  }
  EXPECT_GT(byte_level, 5) << "the test text should have pieces with a leading 'G'";
  // The piece " sat" is labelled as in the heatmaps.
  bool sat = false;
  for (size_t t = 0; t < a->tokens.size(); ++t)
    if (a->tokens[t].piece == "\xC4\xA0sat") {
      sat = true;
      EXPECT_NE(w.input_dock()->token_tooltip(int(t)).toStdString().find("'sat'"),
                std::string::npos);
    }
  EXPECT_TRUE(sat);
}

// Tools > Decode lab on the session's text: the stream runs on a worker while the window stays
// responsive, the table lists every policy, both figures are drawn, a bad policy says why.
TEST(GuiViews, DecodeLabStreamsTheSessionTextUnderPolicies) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  QAction* action = nullptr;
  for (QAction* a : w.findChildren<QAction*>())
    if (a->text() == "&Decode lab...") action = a;
  ASSERT_NE(action, nullptr) << "Tools > Decode lab is missing";
  DecodeDialog* d = w.open_decode_lab();
  d->set_policies("kv_full\nkv_streaming(sinks=4,window=28)\nkv_tova(budget=32)\n");
  d->set_max_tokens(300);
  d->run();
  EXPECT_TRUE(d->running());
  ASSERT_TRUE(wait_until([&] { return !d->running(); }, 120000));
  ASSERT_TRUE(d->error().isEmpty()) << d->error().toStdString();
  ASSERT_NE(d->result(), nullptr);
  EXPECT_EQ(d->table_rows(), 3);
  EXPECT_EQ(d->result()->runs[1].spec, "kv_streaming(sinks=4,window=28,reposition=true)");
  for (int tab : {0, 1}) {
    const QImage img = d->figure_image(tab);
    ASSERT_FALSE(img.isNull()) << tab;
    EXPECT_GT(distinct_colors(img, {0, 0, float(img.width()), float(img.height())}), 20) << tab;
  }
  d->grab().save(screenshot_path("decode_lab.png"));
  d->set_policies("kv_h2o(budget=4,recent=9)\n");
  d->run();
  ASSERT_TRUE(wait_until([&] { return !d->running(); }, 30000));
  EXPECT_NE(d->error().toStdString().find("recent"), std::string::npos) << d->error().toStdString();
  EXPECT_EQ(d->table_rows(), 3) << "a failed run leaves the last results";
  d->close();
}

TEST(GuiViews, DecodeLabStepsThroughEachTokensAttentionOverTheCache) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  DecodeDialog* d = w.open_decode_lab();
  d->set_policies("kv_full\nkv_streaming(sinks=4,window=16)+kv_quant(bits=4,group=8)\n");
  DecodeStepsView* v = d->steps_view();
  ASSERT_NE(v, nullptr);
  v->set_policy(1);
  v->set_steps(40);
  v->set_layer_head(1, 2);
  v->trace();
  ASSERT_TRUE(wait_until([&] { return !v->running(); }, 120000));
  ASSERT_TRUE(v->error().isEmpty()) << v->error().toStdString();
  ASSERT_NE(v->result(), nullptr);
  EXPECT_EQ(v->result()->steps.size(), 40u);
  EXPECT_EQ(v->result()->policy,
            "kv_streaming(sinks=4,window=16,reposition=true)+kv_quant(bits=4,group=8,"
            "k_axis=channel,v_axis=token)");
  // Each step of the slider draws that step: the query moves one position per step.
  v->set_step(30);
  const core::FigureData f = v->figure();
  EXPECT_EQ(f.decode.step, 30);
  EXPECT_EQ(f.decode.query, v->result()->steps[30].position);
  EXPECT_EQ(f.decode.layer, 1);
  EXPECT_EQ(f.decode.head, 2);
  int held = 0;
  for (core::DecodeCell c : f.decode.cells)
    held += c == core::DecodeCell::Held || c == core::DecodeCell::Quantised;
  EXPECT_EQ(held, 20);  // 4 sinks + a window of 16
  const QImage img = v->image();
  ASSERT_FALSE(img.isNull());
  EXPECT_GT(distinct_colors(img, {0, 0, float(img.width()), float(img.height())}), 20);
  const QImage before = img;
  v->set_step(31);
  EXPECT_NE(v->image(), before);
  auto* tabs = d->findChild<QTabWidget*>();
  ASSERT_NE(tabs, nullptr);
  tabs->setCurrentWidget(v);
  QCoreApplication::processEvents();
  d->grab().save(screenshot_path("decode_steps.png"));
  // Generating past the prefill: the trace goes on with sampled tokens.
  v->set_generate(true);
  v->set_steps(12);
  v->trace();
  ASSERT_TRUE(wait_until([&] { return !v->running(); }, 60000));
  ASSERT_TRUE(v->error().isEmpty()) << v->error().toStdString();
  EXPECT_EQ(v->result()->steps.size(), 12u);
  EXPECT_GT(v->result()->ids.size(), size_t(v->result()->given));
  d->close();
}

// Approximations in a variant slot: one that replaces attention stands alone (the pattern and
// normaliser combos are disabled), one that wraps the exact parts follows them; enum parameters
// get a word list; both run in the analysis.
TEST(GuiViews, VariantSlotsOfferApproximations) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  VariantSlot* slot = w.variants_dock()->slot(0);
  for (const std::string spec :
       {"linear(feature=relu)", "cosformer", "sinks_window(sinks=4,window=16)+delta(stride=8)",
        "window(size=32)+quant_qk(bits=4,smooth=true)"}) {
    const std::string canonical = make_variant(spec).spec();
    slot->set_spec(spec);
    EXPECT_EQ(slot->spec(), canonical);
    w.submit_now();
    ASSERT_TRUE(wait_settled(w, 60000)) << spec << ": " << w.last_error().toStdString();
    ASSERT_TRUE(w.last_error().isEmpty()) << w.last_error().toStdString();
    EXPECT_EQ(w.analysis()->panels[1].spec, canonical);
  }
  // Choosing "none" again gives the exact pattern back; the enum editor is a word list.
  const QList<QComboBox*> combos = slot->findChildren<QComboBox*>();
  QComboBox* approx = nullptr;
  for (QComboBox* c : combos)
    if (c->count() > 0 && c->itemText(0).startsWith("approximation: none")) approx = c;
  ASSERT_NE(approx, nullptr);
  slot->set_spec("linear(feature=relu)");
  QComboBox* feature = slot->findChild<QComboBox*>("feature");
  ASSERT_NE(feature, nullptr);
  EXPECT_EQ(feature->currentText(), "relu");
  feature->setCurrentText("elu1");
  EXPECT_EQ(slot->spec(), "linear(feature=elu1)");
  approx->setCurrentIndex(0);
  EXPECT_EQ(slot->spec(), "window(size=32)");
}

}  // namespace
}  // namespace attn::gui::test

int main(int argc, char** argv) {
  return attn::gui::test::run_gui_tests(argc, argv, "test_gui_views", &attn::gui::test::g_instance);
}
