// GUI tests of the Attribution dock and view: the real application (Qt main window, Vulkan view on
// lavapipe under Xvfb, the default models and the attribution core). A run from the dock goes
// through the job runner, its result becomes the view's document and the view is shown; the view
// is checked through the canvas's marks (Canvas::marks) and the swapchain's pixels. Screenshots go
// to $ATTNSCOPE_SCREENSHOT_DIR or the working directory.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <QVulkanInstance>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/session/session.h"
#include "app/gui/attribution_dock.h"
#include "app/gui/main_window.h"
#include "app/gui/vulkan_view.h"
#include "gui_driver.h"
#include "gui_test_main.h"
#include "render/canvas.h"

namespace attn::gui::test {
namespace {

using Mark = render::Canvas::Mark;

QVulkanInstance* g_instance = nullptr;

const char* kText =
    "The keeper of the lighthouse wrote every evening in a small book. When the storm came, "
    "the keeper climbed the stairs and lit the";

::testing::AssertionResult show_settled(MainWindow& w) {
  w.view()->setVulkanInstance(g_instance);
  w.show();
  if (!wait_until([&] { return w.view()->frames_drawn() > 0; }, 20000))
    return ::testing::AssertionFailure() << "no frame";
  if (!wait_settled(w, 60000, 3))
    return ::testing::AssertionFailure() << "not settled: " << w.last_error().toStdString();
  if (!w.last_error().isEmpty())
    return ::testing::AssertionFailure() << w.last_error().toStdString();
  return ::testing::AssertionSuccess();
}

std::vector<Mark> marks(MainWindow& w, const std::string& kind) {
  std::vector<Mark> out;
  for (const Mark& m : w.view()->canvas()->marks())
    if (m.kind == kind) out.push_back(m);
  return out;
}

std::string overflows(MainWindow& w) {
  std::string all;
  for (const std::string& t : w.view()->canvas()->text_overflows()) all += "\n  " + t;
  return all;
}

// Checks `methods` in the dock (and nothing else), sets the curves, presses Run and waits for the
// job to end.
::testing::AssertionResult run_methods(MainWindow& w, const std::vector<std::string>& methods,
                                       bool curves) {
  AttributionDock* dock = w.attribution_dock();
  dock->raise();
  core::SessionAttribution s = dock->setup();
  s.methods = methods;
  s.faithfulness = curves;
  s.steps = 10;
  dock->set_setup(s);
  for (const std::string& m : methods)
    if (!dock->method_box(m) || !dock->method_box(m)->isChecked())
      return ::testing::AssertionFailure() << m << " is not checked";
  if (!dock->run_button()->isEnabled()) return ::testing::AssertionFailure() << "Run disabled";
  dock->run_button()->click();
  if (!dock->running()) return ::testing::AssertionFailure() << "Run started nothing";
  if (!wait_until([&] { return !dock->running(); }, 120000))
    return ::testing::AssertionFailure() << "the run never ended";
  w.view()->redraw();
  wait_settled(w, 30000, 3);
  return ::testing::AssertionSuccess();
}

// Lets `n` more frames be drawn.
void wait_frames(MainWindow& w, int n) {
  const int until = w.view()->frames_drawn() + n;
  wait_until(
      [&] {
        w.view()->redraw();  // frames come on demand
        return w.view()->frames_drawn() >= until;
      },
      10000);
}

void move_mouse(MainWindow& w, QPointF at) {
  QMouseEvent mv(QEvent::MouseMove, at, w.view()->mapToGlobal(at), Qt::NoButton, Qt::NoButton,
                 Qt::NoModifier);
  QCoreApplication::sendEvent(w.view(), &mv);
  wait_frames(w, 3);
}

std::array<float, 4> rect(const Mark& m) {
  return {m.x0, m.y0, m.x1, m.y1};
}

// Text: six methods with curves on the default text model. The view opens by itself, draws a row
// per method (coloured, not blank), the agreement triangle and both curves, cuts no text, and a
// hovered token names itself; the setup survives a save, and the session reopens on the view
// and runs it again.
TEST(GuiAttribution, TextRunDrawsEveryMethodAndReopensFromTheSession) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  const std::vector<std::string> methods = {
      "attention", "rollout", "grad_input", "integrated_gradients", "attnlrp", "occlusion"};
  const std::string path =
      QDir::temp().filePath("attnscope-gui-attribution.attnscope.json").toStdString();
  {
    GuiOptions o = base_options();
    o.text = kText;
    o.variants = {"window(size=8)"};
    MainWindow w(o);
    ASSERT_TRUE(show_settled(w));
    ASSERT_TRUE(run_methods(w, methods, true));
    AttributionDock* dock = w.attribution_dock();
    ASSERT_TRUE(dock->doc()) << dock->status_label()->text().toStdString();
    EXPECT_FALSE(dock->status_label()->text().contains("Cannot"))
        << dock->status_label()->text().toStdString();
    EXPECT_EQ(w.view()->canvas()->settings().view, render::ViewKind::Attribution);
    const render::AttributionDoc& d = *dock->doc();
    EXPECT_EQ(d.methods, methods);
    EXPECT_EQ(d.units(), w.analysis()->n_tokens());
    EXPECT_EQ(d.curves.size(), methods.size() + 1);
    const QImage shot = w.view()->grab_rgba();
    shot.save(screenshot_path("attribution_text.png"));
    dock->grab().save(screenshot_path("attribution_dock.png"));
    // File > Export figure on this view: the attribution preset of this run, and its sidecar.
    const std::string png =
        QDir::temp().filePath("attnscope-gui-attribution-figure.png").toStdString();
    EXPECT_EQ(w.export_figure(QString::fromStdString(png)).toStdString(), "");
    const QImage fig(QString::fromStdString(png));
    EXPECT_GT(distinct_colors(fig, {0, 0, float(fig.width()), float(fig.height())}), 20);
    EXPECT_TRUE(std::filesystem::exists(png + ".attnscope.json"));
    if (!qEnvironmentVariableIsEmpty("ATTNSCOPE_SCREENSHOT_DIR"))
      fig.save(screenshot_path("attribution_figure.png"));
    std::filesystem::remove(png);
    std::filesystem::remove(png + ".attnscope.json");
    w.grab().save(screenshot_path("attribution_window.png"));
    const auto rows = marks(w, "attribution.row");
    ASSERT_EQ(rows.size(), methods.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i].text, methods[i]);
      EXPECT_GT(distinct_colors(shot, rect(rows[i])), 12) << methods[i] << " row looks blank";
    }
    const auto matrix = marks(w, "attribution.matrix");
    ASSERT_EQ(matrix.size(), 1u);
    EXPECT_GT(distinct_colors(shot, rect(matrix[0])), 8);
    const auto curves = marks(w, "attribution.curves");
    ASSERT_EQ(curves.size(), 2u);
    for (const Mark& c : curves) EXPECT_GT(distinct_colors(shot, rect(c)), 6) << c.text;
    EXPECT_EQ(marks(w, "attribution.rows").at(0).text, "chips");
    EXPECT_EQ(overflows(w), "");
    // A token under the mouse: its label and its method in the hover's mark.
    const Mark& first = rows[1];
    const float lab = std::max(first.x0 + (first.x1 - first.x0) * 0.25f, first.x0 + 230.f);
    bool named = false;
    for (float x = lab; x < first.x1 && !named; x += 6) {
      move_mouse(w, QPointF(x, first.y0 + 10));
      const auto hover = marks(w, "attribution.hover");
      named = !hover.empty() && hover[0].text.find("| rollout") != std::string::npos;
    }
    EXPECT_TRUE(named) << "no token of the rollout row named on hover";
    w.view()->grab_rgba().save(screenshot_path("attribution_text_hover.png"));
    move_mouse(w, QPointF(2, 2));
    // The light theme and presentation mode's large font: still nothing cut.
    w.set_dark(false);
    ASSERT_TRUE(wait_settled(w, 10000, 3));
    EXPECT_EQ(overflows(w), "") << "light theme";
    w.view()->grab_rgba().save(screenshot_path("attribution_text_light.png"));
    w.set_dark(true);
    w.set_presentation(true);
    ASSERT_TRUE(wait_settled(w, 10000, 3));
    EXPECT_EQ(overflows(w), "") << "presentation mode";
    EXPECT_EQ(marks(w, "attribution.row").size(), methods.size() - 0) << "presentation mode";
    w.view()->grab_rgba().save(screenshot_path("attribution_text_presentation.png"));
    w.set_presentation(false);
    ASSERT_TRUE(wait_settled(w, 10000, 3));
    w.save_session_as(QString::fromStdString(path));
  }
  const core::Session s = core::load_session(path);
  EXPECT_EQ(s.attribution.methods, methods);
  EXPECT_TRUE(s.attribution.faithfulness);
  EXPECT_EQ(s.view.view, "attribution");
  GuiOptions o2 = base_options();
  o2.session = path;
  MainWindow w2(o2);
  ASSERT_TRUE(show_settled(w2));
  EXPECT_EQ(w2.attribution_dock()->setup().methods, methods);
  ASSERT_TRUE(wait_until([&] { return w2.attribution_dock()->doc() != nullptr; }, 120000))
      << "the reopened session did not run its attribution";
  ASSERT_TRUE(wait_until([&] { return !marks(w2, "attribution.row").empty(); }, 20000));
  EXPECT_EQ(marks(w2, "attribution.row").size(), methods.size());
  std::filesystem::remove(path);
}

// An edit after a run marks the view out of date; the run is kept until Run is pressed again.
TEST(GuiAttribution, AnEditedInputMarksTheRunOutOfDate) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  ASSERT_TRUE(run_methods(w, {"rollout", "grad_input"}, false));
  ASSERT_TRUE(w.attribution_dock()->doc());
  EXPECT_TRUE(marks(w, "attribution.note").empty());
  core::SessionAttribution s = w.attribution_dock()->setup();
  EXPECT_EQ(s.methods, (std::vector<std::string>{"rollout", "grad_input"}));
  // A new text: the analysis reruns, the attribution stays and says it is out of date.
  w.open_text_file(QString(ATTNSCOPE_SOURCE_DIR) + "/assets/samples/lighthouse.txt");
  ASSERT_TRUE(wait_until([&] { return w.analysis() && w.analysis()->n_tokens() > 100; }, 60000));
  ASSERT_TRUE(wait_settled(w, 60000, 3));
  w.set_view(render::ViewKind::Attribution);
  wait_settled(w, 10000, 3);
  const auto note = marks(w, "attribution.note");
  ASSERT_FALSE(note.empty());
  EXPECT_NE(note[0].text.find("Out of date"), std::string::npos) << note[0].text;
  // Run again at position 60: the note goes, the rows cover the new text, the tokens after the
  // position are greyed (not ranked).
  // bf16 matmuls this time: the dock keeps the choice and the title names it.
  s = w.attribution_dock()->setup();
  s.position = 60;
  s.matmul = "bf16";
  w.attribution_dock()->set_setup(s);
  EXPECT_EQ(w.attribution_dock()->setup().matmul, "bf16");
  ASSERT_TRUE(run_methods(w, {"rollout", "grad_input", "occlusion"}, true));
  EXPECT_TRUE(marks(w, "attribution.note").empty());
  const render::AttributionDoc& d = *w.attribution_dock()->doc();
  EXPECT_NE(d.title.find("bf16 matmuls"), std::string::npos) << d.title;
  EXPECT_EQ(d.units(), w.analysis()->n_tokens());
  EXPECT_EQ(d.n_ranked, 61);
  EXPECT_EQ(d.target_unit, 60);
  EXPECT_EQ(overflows(w), "");
  w.view()->grab_rgba().save(screenshot_path("attribution_text_long.png"));
}

// A gradient method with a sigmoid variant: the dock says why, the view keeps what it had, no
// crash; attention-based methods then run with the same variant.
TEST(GuiAttribution, AGradientMethodWithASigmoidVariantIsRefusedInTheDock) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  o.variants = {"dense+sigmoid(bias_offset=0)"};
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  AttributionDock* dock = w.attribution_dock();
  core::SessionAttribution s = dock->setup();
  s.with_variant = true;
  dock->set_setup(s);
  ASSERT_TRUE(run_methods(w, {"grad_input", "rollout"}, false));
  const std::string status = dock->status_label()->text().toStdString();
  EXPECT_NE(status.find("Cannot attribute"), std::string::npos) << status;
  EXPECT_NE(status.find("softmax"), std::string::npos) << status;
  EXPECT_FALSE(dock->doc());
  EXPECT_FALSE(dock->running());
  EXPECT_TRUE(dock->run_button()->isEnabled());
  ASSERT_TRUE(run_methods(w, {"attention", "rollout", "occlusion"}, false));
  ASSERT_TRUE(dock->doc()) << dock->status_label()->text().toStdString();
  EXPECT_NE(dock->doc()->title.find("sigmoid"), std::string::npos) << dock->doc()->title;
  // A bad target is refused with its reason too.
  s = dock->setup();
  s.methods = {"rollout"};
  s.foil = s.target = 5;
  dock->set_setup(s);
  dock->run_button()->click();
  ASSERT_TRUE(wait_until([&] { return !dock->running(); }, 60000));
  EXPECT_TRUE(dock->status_label()->text().contains("foil is the target"))
      << dock->status_label()->text().toStdString();
}

// Images: the input and each method's patch scores over it, one panel each, coloured.
TEST(GuiAttribution, VisionRunDrawsSmallMultiples) {
  if (!have_model("default-vision")) GTEST_SKIP() << "default-vision model not found";
  const std::string img = sample_image();
  if (img.empty()) GTEST_SKIP() << "no sample image";
  GuiOptions o = base_options();
  o.model = "default-vision";
  o.image = img;
  o.variants = {"window(size=8)"};
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  AttributionDock* dock = w.attribution_dock();
  core::SessionAttribution s = dock->setup();
  s.baseline = "mean";
  dock->set_setup(s);
  const std::vector<std::string> methods = {"rollout", "grad_input", "integrated_gradients",
                                            "chefer", "occlusion"};
  ASSERT_TRUE(run_methods(w, methods, true));
  ASSERT_TRUE(dock->doc()) << dock->status_label()->text().toStdString();
  EXPECT_TRUE(dock->doc()->image);
  EXPECT_EQ(dock->setup().baseline, "mean");
  const QImage shot = w.view()->grab_rgba();
  shot.save(screenshot_path("attribution_vision.png"));
  const auto panels = marks(w, "attribution.panel");
  ASSERT_EQ(panels.size(), methods.size() + 1);
  EXPECT_EQ(panels[0].text, "input");
  for (size_t p = 0; p < panels.size(); ++p) {
    EXPECT_GT(distinct_colors(shot, rect(panels[p])), 20) << panels[p].text;
    EXPECT_GT(panels[p].x1 - panels[p].x0, 60) << "panel too small";
  }
  EXPECT_EQ(marks(w, "attribution.curves").size(), 2u);
  EXPECT_EQ(overflows(w), "");
  // A hovered patch is named in every panel's method.
  const Mark& p1 = panels[1];
  move_mouse(w, QPointF((p1.x0 + p1.x1) / 2, (p1.y0 + p1.y1) / 2));
  const auto hover = marks(w, "attribution.hover");
  ASSERT_EQ(hover.size(), 1u);
  EXPECT_NE(hover[0].text.find(methods[0]), std::string::npos) << hover[0].text;
}

// 1024 tokens and nine methods (a document made here, as a long-context model would give):
// auto layout turns the rows into compact cells that fit, chips scroll, nothing is cut.
TEST(GuiAttribution, LongInputsWrapIntoCellsOrScroll) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  // Nothing left to publish over the document made here.
  QElapsedTimer idle;
  idle.start();
  ASSERT_TRUE(wait_until([&] { return w.worker_idle(); }, 120000));
  std::printf("[attribution] worker idle after %.1f s\n", idle.elapsed() / 1e3);
  auto doc = std::make_shared<render::Document>();
  render::AttributionDoc& d = doc->attribution;
  d.present = true;
  d.title = "Target ' the' next after position 899 \u00b7 p 0.2 \u00b7 synthetic";
  d.target_label = "' the'";
  const int U = 1024, M = 9;
  const char* words[] = {"the", "keeper", "of", "light", "house", ",", "wrote", "evening", "."};
  for (int u = 0; u < U; ++u) {
    d.labels.push_back(words[u % 9]);
    d.word_start.push_back(u % 9 != 4 && u % 9 != 5);
    d.line_break.push_back(u % 200 == 199);
    d.ranked.push_back(u < U - 124);  // the last tokens come after the target position
  }
  d.n_ranked = U - 124;
  d.target_unit = U - 125;
  for (int m = 0; m < M; ++m) {
    d.methods.push_back("method" + std::to_string(m));
    d.titles.push_back("Method number " + std::to_string(m) + " (a long title)");
    d.short_titles.push_back("Method " + std::to_string(m));
    d.details.push_back("max |s| 1 \u00b7 0.01 s");
    std::vector<float> sc;
    std::vector<int> rk;
    for (int u = 0; u < U; ++u) {
      sc.push_back(std::sin(0.05f * float(u) + float(m)) * float((u * 7919 + m) % 13) / 12.f);
      rk.push_back(u + 1);
    }
    d.scores.push_back(sc);
    d.ranks.push_back(rk);
    d.scale.push_back(1);
  }
  d.spearman.assign(size_t(M * M), 0.5f);
  d.kendall.assign(size_t(M * M), 0.4f);
  d.top_k.assign(size_t(M * M), 0.6f);
  d.k = 5;
  w.set_view(render::ViewKind::Attribution);
  for (int layout : {0, 1, 2}) {
    w.view()->canvas()->settings().attribution_layout = layout;
    // A late trade-off sweep may publish the app's own document over this one: set it again.
    bool drawn = false;
    for (int tries = 0; tries < 10 && !drawn; ++tries) {
      w.view()->canvas()->set_document(doc);
      w.view()->redraw();
      drawn = wait_until([&] { return !marks(w, "attribution.rows").empty(); }, 2000);
    }
    ASSERT_TRUE(drawn);
    wait_frames(w, 3);
    const auto rows = marks(w, "attribution.rows");
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].text, layout == 1 ? "chips" : "cells") << "layout " << layout;
    const auto matrix = marks(w, "attribution.matrix");
    ASSERT_EQ(matrix.size(), 1u);
    EXPECT_GE(matrix[0].y0, rows[0].y1) << "the rows run into the matrix";
    EXPECT_EQ(overflows(w), "") << "layout " << layout;
    if (layout != 1) {
      // Cells: every method's row is on screen at once.
      EXPECT_EQ(marks(w, "attribution.row").size(), size_t(M)) << "layout " << layout;
    }
    // Frames stay cheap: a few redraws, each built within a frame budget.
    w.view()->clear_frame_times();
    for (int i = 0; i < 5; ++i) {
      move_mouse(w, QPointF(rows[0].x0 + 300 + 40 * i, rows[0].y0 + 20 + 10 * i));
    }
    std::vector<double> cpu = w.view()->frame_cpu_times();
    ASSERT_FALSE(cpu.empty());
    std::sort(cpu.begin(), cpu.end());
    std::printf("[attribution] layout %d: median frame build %.1f ms over %zu frames\n", layout,
                cpu[cpu.size() / 2], cpu.size());
    EXPECT_LT(cpu[cpu.size() / 2], 50) << "layout " << layout;
    const QImage shot = w.view()->grab_rgba();
    EXPECT_GT(distinct_colors(shot, rect(rows[0])), 30);
    shot.save(screenshot_path(QString("attribution_long_%1.png").arg(layout)));
  }
}

}  // namespace
}  // namespace attn::gui::test

int main(int argc, char** argv) {
  return attn::gui::test::run_gui_tests(argc, argv, "test_gui_attribution",
                                        &attn::gui::test::g_instance);
}
