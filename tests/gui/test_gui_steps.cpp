// GUI tests of the step-through view (render/steps_view.cpp): the real application (Qt main
// window, Vulkan view on lavapipe under Xvfb, the default text model) on a short text. The view
// draws every stage of the selected head as a matrix of coloured cells, names the arithmetic of
// a hovered number, follows a clicked entry through every stage, follows the app's selection, and
// shows a message (no crash) for an input over its limit. Screenshots go to
// $ATTNSCOPE_SCREENSHOT_DIR or the working directory.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QMouseEvent>
#include <QPlainTextEdit>
#include <QVulkanInstance>
#include <array>
#include <cctype>
#include <string>
#include <vector>

#include "app/gui/input_dock.h"
#include "app/gui/main_window.h"
#include "app/gui/model_dock.h"
#include "app/gui/vulkan_view.h"
#include "gui_driver.h"
#include "gui_test_main.h"
#include "render/canvas.h"

namespace attn::gui::test {
namespace {

using Mark = render::Canvas::Mark;

QVulkanInstance* g_instance = nullptr;

const char* kText = "The cat sat on the mat. The dog";

std::vector<Mark> marks(MainWindow& w, const std::string& kind) {
  std::vector<Mark> out;
  for (const Mark& m : w.view()->canvas()->marks())
    if (m.kind == kind) out.push_back(m);
  return out;
}

const Mark* matrix(MainWindow& w, const std::string& id) {
  for (const Mark& m : w.view()->canvas()->marks())
    if (m.kind == "steps.matrix" && m.text == id) return &m;
  return nullptr;
}

void wait_frames(MainWindow& w, int n) {
  const int until = w.view()->frames_drawn() + n;
  wait_until(
      [&] {
        w.view()->redraw();
        return w.view()->frames_drawn() >= until;
      },
      10000);
}

void mouse(MainWindow& w, QEvent::Type t, QPointF at, Qt::MouseButton b, Qt::MouseButtons held) {
  QMouseEvent e(t, at, w.view()->mapToGlobal(at), b, held, Qt::NoModifier);
  QCoreApplication::sendEvent(w.view(), &e);
  wait_frames(w, 3);
}

void click(MainWindow& w, QPointF at) {
  mouse(w, QEvent::MouseMove, at, Qt::NoButton, Qt::NoButton);
  mouse(w, QEvent::MouseButtonPress, at, Qt::LeftButton, Qt::LeftButton);
  mouse(w, QEvent::MouseButtonRelease, at, Qt::LeftButton, Qt::NoButton);
}

std::array<float, 4> rect(const Mark& m) {
  return {m.x0, m.y0, m.x1, m.y1};
}

// The centre of cell (row, col) of an n x n matrix drawn in `m`.
QPointF cell(const Mark& m, int n, int row, int col) {
  return QPointF(m.x0 + (m.x1 - m.x0) * (col + 0.5f) / float(n),
                 m.y0 + (m.y1 - m.y0) * (row + 0.5f) / float(n));
}

// "... · 14 tokens · ..." -> 14.
int tokens_in(const std::string& title) {
  const size_t at = title.find(" tokens");
  if (at == std::string::npos) return 0;
  size_t b = at;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(title[b - 1]))) --b;
  return std::stoi(title.substr(b, at - b));
}

// Shows the window on the view, waits for the steps of the selected head (title containing
// `want`).
::testing::AssertionResult open_steps(MainWindow& w, const std::string& want) {
  w.view()->setVulkanInstance(g_instance);
  w.show();
  if (!wait_until([&] { return w.view()->frames_drawn() > 0; }, 20000))
    return ::testing::AssertionFailure() << "no frame";
  if (!wait_settled(w, 60000, 3))
    return ::testing::AssertionFailure() << "not settled: " << w.last_error().toStdString();
  w.set_view(render::ViewKind::Steps);
  const bool ok = wait_until(
      [&] {
        w.view()->redraw();
        const auto t = marks(w, "steps.title");
        return !t.empty() && t[0].text.find(want) != std::string::npos &&
               marks(w, "steps.matrix").size() == 10;
      },
      60000);
  if (!ok) {
    const auto t = marks(w, "steps.title");
    const auto m = marks(w, "steps.message");
    return ::testing::AssertionFailure()
           << "no steps for '" << want << "': title '" << (t.empty() ? "" : t[0].text)
           << "', message '" << (m.empty() ? "" : m[0].text) << "'";
  }
  wait_frames(w, 3);
  return ::testing::AssertionSuccess();
}

// Dense attention of L1H2 on default-text: ten coloured matrices, a hovered weight names its
// softmax, a click follows (query, key) through the four N x N stages and the panel spells it
// out; the view follows the app's selection; an input over the limit shows a message.
TEST(GuiSteps, StagesHoverClickFollowSelectionAndRefuseLongInput) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  o.variants = {};
  o.layer = 1;
  o.head = 2;
  MainWindow w(o);
  ASSERT_TRUE(open_steps(w, "layer 1, head 2"));
  EXPECT_TRUE(w.view()->canvas()->text_overflows().empty())
      << w.view()->canvas()->text_overflows().front();

  const QImage shot = w.view()->grab_rgba();
  for (const char* id :
       {"x", "q", "k", "v", "scores", "scaled", "masked", "weights", "out", "proj"}) {
    const Mark* m = matrix(w, id);
    ASSERT_NE(m, nullptr) << id;
    EXPECT_GT(m->x1 - m->x0, 60) << id;
    EXPECT_GT(distinct_colors(shot, rect(*m)), 12) << id << " looks uniform";
  }

  // The weights matrix: n x n cells; hover (5, 2).
  const Mark weights = *matrix(w, "weights");
  const auto title = marks(w, "steps.title");
  const int n = tokens_in(title[0].text);
  ASSERT_GT(n, 10) << title[0].text;
  mouse(w, QEvent::MouseMove, cell(weights, n, 5, 2), Qt::NoButton, Qt::NoButton);
  auto hover = marks(w, "steps.hover");
  ASSERT_EQ(hover.size(), 1u);
  EXPECT_NE(hover[0].text.find("exp("), std::string::npos) << hover[0].text;

  // A click in the masked matrix follows (5, 2) through every stage.
  const Mark masked = *matrix(w, "masked");
  click(w, cell(masked, n, 5, 2));
  const auto selected = marks(w, "steps.selected");
  EXPECT_EQ(selected.size(), 4u);
  const auto follow = marks(w, "steps.follow");
  ASSERT_EQ(follow.size(), 1u);
  EXPECT_NE(follow[0].text.find("query"), std::string::npos) << follow[0].text;
  // Hover a future key of the same row: the causal mask dropped it.
  mouse(w, QEvent::MouseMove, cell(masked, n, 5, 9), Qt::NoButton, Qt::NoButton);
  hover = marks(w, "steps.hover");
  ASSERT_EQ(hover.size(), 1u);
  EXPECT_NE(hover[0].text.find("causal"), std::string::npos) << hover[0].text;
  // Hover a Q value: its dot product with W_q.
  const Mark q = *matrix(w, "q");
  mouse(w, QEvent::MouseMove, QPointF(q.x0 + 6, q.y0 + (q.y1 - q.y0) * 5.5f / n), Qt::NoButton,
        Qt::NoButton);
  hover = marks(w, "steps.hover");
  ASSERT_EQ(hover.size(), 1u);
  EXPECT_NE(hover[0].text.find("W_q"), std::string::npos) << hover[0].text;
  w.view()->grab_rgba().save(screenshot_path("steps.png"));

  // The app's selection moves the view to another head.
  w.model_dock()->set_selection(0, 1);
  ASSERT_TRUE(wait_until(
      [&] {
        w.view()->redraw();
        const auto t = marks(w, "steps.title");
        return !t.empty() && t[0].text.find("layer 0, head 1") != std::string::npos;
      },
      60000));

  // Over the limit: a message in the view, and the window lives on.
  std::string longer;
  for (int i = 0; i < 8; ++i) longer += "The cat sat on the mat. ";
  w.input_dock()->editor()->setPlainText(QString::fromStdString(longer));
  ASSERT_TRUE(wait_until(
      [&] {
        w.view()->redraw();
        const auto m = marks(w, "steps.message");
        return !m.empty() && m[0].text.find("at most 32 tokens") != std::string::npos;
      },
      60000));
  wait_frames(w, 3);
  w.view()->grab_rgba().save(screenshot_path("steps_too_long.png"));
  EXPECT_TRUE(w.isVisible());
}

// A variant from the Variants dock is what the mask stage applies.
TEST(GuiSteps, TheSessionsVariantMasks) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  o.variants = {"sinks_window(sinks=1,window=3)"};
  o.layer = 1;
  o.head = 0;
  MainWindow w(o);
  ASSERT_TRUE(open_steps(w, "sinks_window"));
  const Mark masked = *matrix(w, "masked");
  const int n = tokens_in(marks(w, "steps.title").at(0).text);
  ASSERT_GT(n, 10);
  // Query 10 sees key 5 under dense attention; the window of 3 drops it.
  mouse(w, QEvent::MouseMove, cell(masked, n, 10, 5), Qt::NoButton, Qt::NoButton);
  const auto hover = marks(w, "steps.hover");
  ASSERT_EQ(hover.size(), 1u);
  EXPECT_NE(hover[0].text.find("dropped by sinks_window"), std::string::npos) << hover[0].text;
  w.view()->grab_rgba().save(screenshot_path("steps_variant.png"));
}

// File > Export figure on the view writes the explain-head figure preset of the head shown, with
// its session sidecar, and follows the selection.
TEST(GuiSteps, ExportFigureWritesTheStepsOfTheHeadShown) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  o.variants = {};
  o.layer = 1;
  o.head = 2;
  MainWindow w(o);
  ASSERT_TRUE(open_steps(w, "layer 1, head 2"));
  const QString dir = QDir::temp().filePath("attnscope-gui-steps-figure");
  QDir().mkpath(dir);
  const QString first = dir + "/l1h2.png", second = dir + "/l0h1.png";
  ASSERT_EQ(w.export_figure(first).toStdString(), "");
  ASSERT_TRUE(QFileInfo::exists(first));
  EXPECT_TRUE(QFileInfo::exists(first + ".attnscope.json"));
  const QImage a(first);
  ASSERT_FALSE(a.isNull());
  EXPECT_GT(distinct_colors(a, {0, 0, float(a.width()), float(a.height())}), 20);
  // Another head: its own steps, once the view shows them.
  w.model_dock()->set_selection(0, 1);
  ASSERT_TRUE(open_steps(w, "layer 0, head 1"));
  ASSERT_EQ(w.export_figure(second).toStdString(), "");
  const QImage b(second);
  ASSERT_FALSE(b.isNull());
  EXPECT_GT(distinct_colors(b, {0, 0, float(b.width()), float(b.height())}), 20);
  EXPECT_NE(a, b) << "the export did not follow the selected head";
  QDir(dir).removeRecursively();
}

}  // namespace
}  // namespace attn::gui::test

int main(int argc, char** argv) {
  return attn::gui::test::run_gui_tests(argc, argv, "test_gui_steps", &attn::gui::test::g_instance);
}
