// GUI tests of the Q/K map dock and view: the real application (Qt main window, Vulkan view on
// lavapipe under Xvfb, the default text model and the core's query-key embedding). Compute in the
// dock goes through the job runner, its map becomes the view's document and the view is shown;
// the view is checked through the canvas's marks (Canvas::marks) and the swapchain's pixels.
// Screenshots go to $ATTNSCOPE_SCREENSHOT_DIR or the working directory.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <QVulkanInstance>
#include <algorithm>
#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "app/gui/main_window.h"
#include "app/gui/model_dock.h"
#include "app/gui/qk_dock.h"
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

void wait_frames(MainWindow& w, int n) {
  const int until = w.view()->frames_drawn() + n;
  wait_until(
      [&] {
        w.view()->redraw();  // frames come on demand
        return w.view()->frames_drawn() >= until;
      },
      10000);
}

void mouse(MainWindow& w, QEvent::Type t, QPointF at, Qt::MouseButton b, Qt::MouseButtons held) {
  QMouseEvent e(t, at, w.view()->mapToGlobal(at), b, held, Qt::NoModifier);
  QCoreApplication::sendEvent(w.view(), &e);
  wait_frames(w, 3);
}

void move_mouse(MainWindow& w, QPointF at) {
  mouse(w, QEvent::MouseMove, at, Qt::NoButton, Qt::NoButton);
}

// A left click at `at`, with frames between press and release so that the view sees both.
void click(MainWindow& w, QPointF at) {
  move_mouse(w, at);
  mouse(w, QEvent::MouseButtonPress, at, Qt::LeftButton, Qt::LeftButton);
  mouse(w, QEvent::MouseButtonRelease, at, Qt::LeftButton, Qt::NoButton);
}

std::array<float, 4> rect(const Mark& m) {
  return {m.x0, m.y0, m.x1, m.y1};
}

QPointF centre(const Mark& m) {
  return QPointF((m.x0 + m.x1) / 2, (m.y0 + m.y1) / 2);
}

// Picks `method` in the dock, presses Compute and waits for the job to end and the view to draw.
::testing::AssertionResult compute(MainWindow& w, const std::string& method) {
  QkDock* dock = w.qk_dock();
  dock->raise();
  dock->set_method(method);
  if (dock->method() != method) return ::testing::AssertionFailure() << "no method " << method;
  if (!dock->compute_button()->isEnabled())
    return ::testing::AssertionFailure() << "Compute disabled";
  dock->compute_button()->click();
  if (!dock->running()) return ::testing::AssertionFailure() << "Compute started nothing";
  if (!wait_until([&] { return !dock->running(); }, 120000))
    return ::testing::AssertionFailure() << "the map never came";
  if (!dock->doc())
    return ::testing::AssertionFailure() << dock->status_label()->text().toStdString();
  w.view()->redraw();
  wait_settled(w, 30000, 3);
  wait_frames(w, 3);
  return ::testing::AssertionSuccess();
}

// PCA on the default text model: the view opens by itself and draws every query and key in
// colour; a hovered point names its token, kind and position; a clicked query draws its attention
// row (lines to its keys and the list of its top keys); the figure export writes the qk preset.
TEST(GuiQk, PcaMapHoverAndAQueryRow) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  o.layer = 1;
  o.head = 2;
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  w.set_view(render::ViewKind::Qk);
  wait_frames(w, 3);
  EXPECT_EQ(marks(w, "qk.empty").size(), 1u) << "no hint before a map";
  ASSERT_TRUE(compute(w, "pca"));
  EXPECT_EQ(w.view()->canvas()->settings().view, render::ViewKind::Qk);
  const render::QkDoc& d = *w.qk_dock()->doc();
  const int n = w.analysis()->n_tokens();
  EXPECT_EQ(d.n(), n);
  EXPECT_EQ(d.points.size(), size_t(2 * n));
  EXPECT_EQ(d.layer, 1);
  EXPECT_EQ(d.head, 2);
  EXPECT_EQ(d.pattern.size(), size_t(n) * size_t(n));
  const auto title = marks(w, "qk.title");
  ASSERT_EQ(title.size(), 1u);
  EXPECT_NE(title[0].text.find("layer 1 head 2"), std::string::npos) << title[0].text;
  EXPECT_NE(title[0].text.find("PCA"), std::string::npos) << title[0].text;
  EXPECT_NE(title[0].text.find("rank fidelity"), std::string::npos) << title[0].text;
  EXPECT_TRUE(marks(w, "qk.note").empty());
  const auto plot = marks(w, "qk.plot");
  ASSERT_EQ(plot.size(), 1u);
  EXPECT_NEAR(plot[0].x1 - plot[0].x0, plot[0].y1 - plot[0].y0, 1.0) << "the map is not square";
  const QImage before = w.view()->grab_rgba();
  before.save(screenshot_path("qk_pca.png"));
  EXPECT_GT(distinct_colors(before, rect(plot[0])), 30) << "the map looks blank";
  ASSERT_EQ(marks(w, "qk.colorbar").size(), 1u);
  EXPECT_GT(distinct_colors(before, rect(marks(w, "qk.colorbar")[0])), 20);
  EXPECT_EQ(w.view()->canvas()->text_overflows().size(), 0u);

  // Hover: the point under the mouse names itself.
  auto queries = marks(w, "qk.query");
  ASSERT_EQ(queries.size(), size_t(n));
  move_mouse(w, centre(queries[size_t(n / 2)]));
  const auto hover = marks(w, "qk.hover");
  ASSERT_EQ(hover.size(), 1u);
  EXPECT_NE(hover[0].text.find("position"), std::string::npos) << hover[0].text;
  EXPECT_TRUE(hover[0].text.find("query") != std::string::npos ||
              hover[0].text.find("key") != std::string::npos)
      << hover[0].text;
  w.view()->grab_rgba().save(screenshot_path("qk_hover.png"));

  // Click a late query (it sees most keys); a key may lie on top of one, so try a few.
  std::sort(queries.begin(), queries.end(),
            [](const Mark& a, const Mark& b) { return std::stoi(a.text) > std::stoi(b.text); });
  std::string picked;
  for (size_t i = 0; i < queries.size() && i < 12 && picked.empty(); ++i) {
    click(w, centre(queries[i]));
    const auto sel = marks(w, "qk.selected");
    if (!sel.empty()) picked = sel[0].text;
  }
  ASSERT_FALSE(picked.empty()) << "no query could be picked";
  const auto row = marks(w, "qk.row");
  ASSERT_EQ(row.size(), 1u);
  EXPECT_GT(std::stoi(row[0].text), 0) << "no line to a key";
  const auto top = marks(w, "qk.top");
  EXPECT_GE(top.size(), 3u);
  // The list's weights are the pattern's row, largest first.
  const int q = std::stoi(picked);
  const float* prow = d.pattern.data() + size_t(q) * size_t(n);
  EXPECT_NEAR(*std::max_element(prow, prow + n),
              std::stof(top[0].text.substr(top[0].text.rfind(' ') + 1)), 1e-3);
  move_mouse(w, QPointF(2, 2));
  const QImage after = w.view()->grab_rgba();
  after.save(screenshot_path("qk_row.png"));
  EXPECT_GT(changed_fraction(before, after, rect(plot[0])), 0.01) << "the row drew nothing";

  // Clicking the map's empty corner drops the query.
  click(w, QPointF(plot[0].x0 + 3, plot[0].y0 + 3));
  if (marks(w, "qk.hover").empty()) {
    EXPECT_TRUE(marks(w, "qk.row").empty());
  }

  // File > Export figure on this view writes the qk preset.
  const std::string png = QDir::temp().filePath("attnscope-gui-qk-figure.png").toStdString();
  EXPECT_EQ(w.export_figure(QString::fromStdString(png)).toStdString(), "");
  const QImage fig(QString::fromStdString(png));
  EXPECT_GT(distinct_colors(fig, {0, 0, float(fig.width()), float(fig.height())}), 20);
  std::filesystem::remove(png);
  std::filesystem::remove(png + ".attnscope.json");
}

// A PCA map follows the selected head; t-SNE is computed on the button, marked out of date when
// the head changes, and its title names it.
TEST(GuiQk, PcaFollowsTheHeadAndTsneWaitsForCompute) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = kText;
  MainWindow w(o);
  ASSERT_TRUE(show_settled(w));
  ASSERT_TRUE(compute(w, "pca"));
  QkDock* dock = w.qk_dock();
  EXPECT_EQ(dock->ran_head(), 0);
  w.model_dock()->set_selection(1, 3);
  ASSERT_TRUE(wait_until(
      [&] { return !dock->running() && dock->ran_layer() == 1 && dock->ran_head() == 3; }, 60000))
      << dock->status_label()->text().toStdString();
  wait_settled(w, 30000, 3);
  wait_frames(w, 3);
  ASSERT_EQ(marks(w, "qk.title").size(), 1u);
  EXPECT_NE(marks(w, "qk.title")[0].text.find("layer 1 head 3"), std::string::npos);
  EXPECT_TRUE(marks(w, "qk.note").empty());

  ASSERT_TRUE(compute(w, "tsne"));
  EXPECT_NE(marks(w, "qk.title").at(0).text.find("t-SNE"), std::string::npos);
  const auto plot = marks(w, "qk.plot");
  ASSERT_EQ(plot.size(), 1u);
  const QImage shot = w.view()->grab_rgba();
  EXPECT_GT(distinct_colors(shot, rect(plot[0])), 30);
  shot.save(screenshot_path("qk_tsne.png"));
  w.model_dock()->set_selection(0, 1);
  ASSERT_TRUE(wait_settled(w, 30000, 3));
  wait_frames(w, 3);
  EXPECT_FALSE(dock->running()) << "t-SNE recomputed by itself";
  const auto note = marks(w, "qk.note");
  ASSERT_EQ(note.size(), 1u);
  EXPECT_NE(note[0].text.find("Out of date"), std::string::npos) << note[0].text;
}

}  // namespace
}  // namespace attn::gui::test

int main(int argc, char** argv) {
  return attn::gui::test::run_gui_tests(argc, argv, "test_gui_qk", &attn::gui::test::g_instance);
}
