// GUI tests of lessons (app/gui/lesson_player.h): every built-in lesson played to the end in the
// real app (Qt, Vulkan on lavapipe under Xvfb) with a non-uniform view at every step; Next/Back,
// their buttons and their keys; the input edited at a step; recording and saving; and a bad
// lesson that leaves the app exactly as it was. A screenshot of every built-in step (the window
// with the view composited in) goes to $ATTNSCOPE_SCREENSHOT_DIR when it is set.
#include <gtest/gtest.h>

#include <QApplication>
#include <QColor>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QMimeData>
#include <QPainter>
#include <QPlainTextEdit>
#include <QTest>
#include <QTextBrowser>
#include <QUrl>
#include <QVulkanInstance>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "app/core/session/session.h"
#include "app/core/teaching/lesson.h"
#include "app/gui/attribution_dock.h"
#include "app/gui/input_dock.h"
#include "app/gui/lesson_player.h"
#include "app/gui/main_window.h"
#include "app/gui/qk_dock.h"
#include "app/gui/variants_dock.h"
#include "app/gui/vulkan_view.h"
#include "gui_driver.h"
#include "gui_test_main.h"
#include "render/canvas.h"

namespace attn::gui::test {
namespace {

QVulkanInstance* g_instance = nullptr;

std::string work_dir() {
  const auto d = std::filesystem::temp_directory_path() / "attnscope_gui_lessons";
  std::filesystem::create_directories(d);
  return d.string();
}

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

// Waits until the step's analysis (and, on the Attribution and Q/K views, their runs) is shown.
::testing::AssertionResult step_settled(MainWindow& w, const core::Session& s) {
  auto shown = [&] {
    const auto a = w.analysis();
    return a && a->session.layer == s.layer && a->session.head == s.head &&
           a->session.model.id == s.model.id && a->session.input.kind == s.input.kind &&
           (s.input.kind != "text" || a->session.input.text == s.input.text) &&
           a->session.variants.size() == s.variants.size() &&
           a->session.ablation.heads == s.ablation.heads && w.worker_idle();
  };
  if (!wait_until([&] { return shown() || !w.last_error().isEmpty(); }, 180000))
    return ::testing::AssertionFailure() << "the step's analysis never came";
  if (!w.last_error().isEmpty())
    return ::testing::AssertionFailure() << w.last_error().toStdString();
  if (s.view.view == "attribution" &&
      !wait_until([&] { return w.attribution_dock()->doc() && !w.attribution_dock()->running(); },
                  180000))
    return ::testing::AssertionFailure() << "no attribution";
  if (s.view.view == "qk" &&
      !wait_until([&] { return w.qk_dock()->doc() && !w.qk_dock()->running(); }, 60000))
    return ::testing::AssertionFailure() << "no Q/K map";
  // The step-through's document is computed after the analysis, on a runner of its own.
  auto steps_drawn = [&] {
    w.view()->redraw();
    for (const auto& m : w.view()->canvas()->marks())
      if (m.kind == "steps.matrix") return true;
    return false;
  };
  if (s.view.view == "steps" && !wait_until(steps_drawn, 60000))
    return ::testing::AssertionFailure() << "no step-through";
  if (!wait_settled(w, 60000, 4)) return ::testing::AssertionFailure() << "not settled";
  return ::testing::AssertionSuccess();
}

// The window as the audience sees it: the widgets, with the Vulkan view painted where it sits.
QImage window_shot(MainWindow& w) {
  QImage shot = w.grab().toImage().convertToFormat(QImage::Format_RGB32);
  const QImage view = w.view()->grab_rgba();
  QWidget* c = w.centralWidget();
  QPainter p(&shot);
  p.drawImage(QRect(c->mapTo(&w, QPoint(0, 0)), c->size()), view);
  return shot;
}

// Distinct colours in the middle of the view: a blank or flat panel has a handful.
int view_colours(MainWindow& w) {
  const QImage img = w.view()->grab_rgba();
  return distinct_colors(
      img, {img.width() * 0.15f, img.height() * 0.15f, img.width() * 0.85f, img.height() * 0.85f});
}

// Every built-in lesson: each step opens its session (model, input, selection, view) and shows a
// non-uniform view; Next walks to the end and stops there.
TEST(GuiLessons, EveryBuiltInLessonPlaysToTheEnd) {
  if (!have_model("default-text") || !have_model("default-vision"))
    GTEST_SKIP() << "embedded models not found";
  const QStringList lessons = LessonPlayer::builtin_lessons();
  ASSERT_EQ(lessons.size(), 6) << "the built-in lessons (a)-(f)";
  const bool shots = !qEnvironmentVariableIsEmpty("ATTNSCOPE_SCREENSHOT_DIR");
  MainWindow w(base_options());
  ASSERT_TRUE(show_settled(w));
  LessonPlayer* player = w.lesson_player();
  for (const QString& path : lessons) {
    SCOPED_TRACE(path.toStdString());
    ASSERT_EQ(player->open(path), "");
    ASSERT_TRUE(player->isVisible());
    const QString name = QFileInfo(path).fileName().section('.', 0, 0);
    for (int k = 0; k < player->steps(); ++k) {
      SCOPED_TRACE("step " + std::to_string(k + 1));
      ASSERT_EQ(player->step(), k);
      const core::LessonStep& st = player->lesson().steps[size_t(k)];
      ASSERT_TRUE(step_settled(w, st.session));
      const auto a = w.analysis();
      EXPECT_EQ(a->session.input.kind, st.session.input.kind);
      EXPECT_EQ(a->session.model.id, st.session.model.id);
      EXPECT_EQ(a->session.variants.size(), st.session.variants.size());
      EXPECT_EQ(w.current_session().view.view,
                st.session.view.view == "heatmap" ? "variants" : st.session.view.view);
      EXPECT_GT(view_colours(w), 40) << "a flat view";
      EXPECT_TRUE(
          w.windowTitle().contains(QString("step %1 of %2").arg(k + 1).arg(player->steps())))
          << w.windowTitle().toStdString();
      EXPECT_TRUE(player->caption()->toPlainText().size() > 40);
      if (shots)
        window_shot(w).save(screenshot_path(QString("lesson_%1_%2.png").arg(name).arg(k + 1)));
      if (k + 1 < player->steps()) {
        EXPECT_TRUE(player->next_action()->isEnabled());
        player->next();
      }
    }
    EXPECT_FALSE(player->next_action()->isEnabled()) << "Next past the last step";
    player->next();
    EXPECT_EQ(player->step(), player->steps() - 1);
  }
}

// Next/Back by their buttons' actions and their keys (Page Down/Up, Alt+Right/Left); an edit of
// the input at a step recomputes the views without re-applying the step; presentation mode keeps
// the caption on screen.
TEST(GuiLessons, KeysStepAndTheAudienceMayEditTheInput) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  MainWindow w(base_options());
  ASSERT_TRUE(show_settled(w));
  LessonPlayer* player = w.lesson_player();
  const QString path =
      QString(ATTNSCOPE_SOURCE_DIR) + "/assets/lessons/1-one-head.attnscope-lesson.json";
  ASSERT_EQ(player->open(path), "");
  ASSERT_TRUE(step_settled(w, player->lesson().steps[0].session));
  w.activateWindow();
  QApplication::setActiveWindow(&w);
  QTest::keyClick(&w, Qt::Key_PageDown);
  EXPECT_EQ(player->step(), 1);
  QTest::keyClick(&w, Qt::Key_Right, Qt::AltModifier);
  EXPECT_EQ(player->step(), 2);
  QTest::keyClick(&w, Qt::Key_PageUp);
  EXPECT_EQ(player->step(), 1);
  QTest::keyClick(&w, Qt::Key_Left, Qt::AltModifier);
  EXPECT_EQ(player->step(), 0);
  QTest::keyClick(&w, Qt::Key_PageUp);  // stays at the first step
  EXPECT_EQ(player->step(), 0);
  player->go(3);
  ASSERT_TRUE(step_settled(w, player->lesson().steps[3].session));
  const QImage before = w.view()->grab_rgba();
  // The audience edits the text: the views follow, the step stays.
  const QString text = "And Moses said unto the people, Fear ye not, stand still.";
  w.input_dock()->editor()->setPlainText(text);
  ASSERT_TRUE(wait_until(
      [&] {
        const auto a = w.analysis();
        return a && a->session.input.text == text.toStdString() && w.worker_idle();
      },
      120000));
  ASSERT_TRUE(wait_settled(w, 60000, 4));
  const QImage after = w.view()->grab_rgba();
  EXPECT_GT(changed_fraction(before, after, {0, 0, float(after.width()), float(after.height())}),
            0.01)
      << "the view did not follow the edit";
  EXPECT_EQ(player->step(), 3);
  EXPECT_EQ(w.analysis()->session.layer, 1);  // the step's selection kept
  // Back re-applies a step, with its own text.
  player->back();
  ASSERT_TRUE(step_settled(w, player->lesson().steps[2].session));
  EXPECT_EQ(w.analysis()->session.input.text, player->lesson().steps[2].session.input.text);
  // Presentation mode hides the docks but not the lesson.
  w.set_presentation(true);
  QApplication::processEvents();
  EXPECT_TRUE(player->isVisible());
  EXPECT_FALSE(w.input_dock()->isVisible());
  QTest::keyClick(&w, Qt::Key_PageDown);
  EXPECT_EQ(player->step(), 3);
  ASSERT_TRUE(step_settled(w, player->lesson().steps[3].session));
  if (!qEnvironmentVariableIsEmpty("ATTNSCOPE_SCREENSHOT_DIR"))
    window_shot(w).save(screenshot_path("lesson_presentation.png"));
  w.set_presentation(false);
}

// The marks of `kind` the view drew last frame.
std::vector<render::Canvas::Mark> marks_of(MainWindow& w, const std::string& kind) {
  std::vector<render::Canvas::Mark> out;
  for (const auto& m : w.view()->canvas()->marks())
    if (m.kind == kind) out.push_back(m);
  return out;
}

// Whether a pixel of the lesson highlight's magenta (render::kHighlightColor) lies within 2 px
// of the logical point (x, y) of the view's grab.
bool highlight_pixel_near(MainWindow& w, const QImage& img, float x, float y) {
  const double sx = double(img.width()) / w.view()->width(),
               sy = double(img.height()) / w.view()->height();
  const int px = int(std::lround(x * sx)), py = int(std::lround(y * sy));
  for (int dy = -2; dy <= 2; ++dy)
    for (int dx = -2; dx <= 2; ++dx) {
      if (!img.valid(px + dx, py + dy)) continue;
      const QColor c = img.pixelColor(px + dx, py + dy);
      if (c.red() > 200 && c.green() < 90 && c.blue() > 150) return true;
    }
  return false;
}

// A step's highlight drawn in the views: the heatmap outlines the highlighted cell in magenta
// and marks the highlighted token on its axes, the tokens view boxes the token; a step without
// highlights and closing the Lesson panel clear them.
TEST(GuiLessons, HighlightsAreDrawnInTheViews) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  const std::string path = work_dir() + "/highlights" + core::kLessonSuffix;
  {
    std::ofstream f(path);
    f << R"({"format": "attnscope-lesson", "version": 1, "title": "Highlights",
      "defaults": {"model": {"id": "default-text"},
                   "input": {"kind": "text", "text": "And God said, Let there be light: and there was light."},
                   "selection": {"layer": 0, "head": 3}},
      "steps": [
        {"caption": "A cell.", "highlight": {"tokens": [2], "cells": [[12, 11]]},
         "session": {"view": {"view": "heatmap"}}},
        {"caption": "A token.", "highlight": {"tokens": [2]},
         "session": {"view": {"view": "tokens"}}},
        {"caption": "Nothing.", "session": {"view": {"view": "heatmap"}}}
      ]})";
  }
  MainWindow w(base_options());
  ASSERT_TRUE(show_settled(w));
  LessonPlayer* player = w.lesson_player();
  ASSERT_EQ(player->open(QString::fromStdString(path)), "");
  ASSERT_TRUE(step_settled(w, player->lesson().steps[0].session));
  const render::DisplaySettings& d = w.view()->canvas()->settings();
  ASSERT_EQ(d.highlight_cells, (std::vector<std::pair<int, int>>{{12, 11}}));
  ASSERT_EQ(d.highlight_tokens, std::vector<int>{2});
  // The cell's outline: magenta on its edges, where the view put it.
  const auto cells = marks_of(w, "heat.highlight");
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].text, "12,11");
  EXPECT_FALSE(marks_of(w, "heat.highlight_row").empty());
  EXPECT_FALSE(marks_of(w, "heat.highlight_col").empty());
  QImage img = w.view()->grab_rgba();
  const auto& c = cells[0];
  EXPECT_TRUE(highlight_pixel_near(w, img, c.x0, (c.y0 + c.y1) / 2)) << "left edge";
  EXPECT_TRUE(highlight_pixel_near(w, img, c.x1, (c.y0 + c.y1) / 2)) << "right edge";
  EXPECT_TRUE(highlight_pixel_near(w, img, (c.x0 + c.x1) / 2, c.y0)) << "top edge";
  EXPECT_TRUE(highlight_pixel_near(w, img, (c.x0 + c.x1) / 2, c.y1)) << "bottom edge";
  if (!qEnvironmentVariableIsEmpty("ATTNSCOPE_SCREENSHOT_DIR"))
    window_shot(w).save(screenshot_path("lesson_highlight.png"));
  // The tokens view boxes the highlighted token.
  player->next();
  ASSERT_TRUE(step_settled(w, player->lesson().steps[1].session));
  EXPECT_TRUE(d.highlight_cells.empty());
  const auto tokens = marks_of(w, "tokens.highlight");
  ASSERT_FALSE(tokens.empty());
  img = w.view()->grab_rgba();
  EXPECT_TRUE(highlight_pixel_near(w, img, tokens[0].x0, (tokens[0].y0 + tokens[0].y1) / 2));
  if (!qEnvironmentVariableIsEmpty("ATTNSCOPE_SCREENSHOT_DIR"))
    window_shot(w).save(screenshot_path("lesson_highlight_tokens.png"));
  // A step without highlights clears them.
  player->next();
  ASSERT_TRUE(step_settled(w, player->lesson().steps[2].session));
  EXPECT_TRUE(d.highlight_tokens.empty());
  EXPECT_TRUE(d.highlight_cells.empty());
  EXPECT_TRUE(marks_of(w, "heat.highlight").empty());
  // Back to the cell, then the Lesson panel closed: gone from the view.
  player->go(0);
  ASSERT_TRUE(step_settled(w, player->lesson().steps[0].session));
  EXPECT_EQ(marks_of(w, "heat.highlight").size(), 1u);
  player->close();
  QApplication::processEvents();
  ASSERT_TRUE(wait_settled(w, 60000, 3));
  EXPECT_TRUE(d.highlight_cells.empty());
  EXPECT_TRUE(marks_of(w, "heat.highlight").empty());
  img = w.view()->grab_rgba();
  EXPECT_FALSE(highlight_pixel_near(w, img, c.x0, (c.y0 + c.y1) / 2));
}

// A bad lesson after a good session: the title, the input, the variants, the view and the
// session are exactly as they were, and the message names the file, the step and the field.
TEST(GuiLessons, ABadLessonLeavesTheAppAsItWas) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  core::Session s;
  s.input.text = "The cat sat on the mat. The cat sat on the mat.";
  s.variants = {"window(size=4)", "block_topk(block=4,k=2)"};
  s.layer = 1;
  s.head = 2;
  s.view.view = "grid";
  const std::string session = work_dir() + "/good.attnscope.json";
  core::save_session(s, session);
  nlohmann::json bad = core::lesson_to_json(core::lesson_from_json(
      nlohmann::json::parse(R"({"format": "attnscope-lesson", "version": 1, "title": "Bad",
        "defaults": {"model": {"id": "default-text"}},
        "steps": [{"caption": "fine", "session": {"input": {"kind": "text", "text": "A b c."}}},
                  {"caption": "bad", "session": {"input": {"kind": "text", "text": "A b c."}}}]})"),
      "bad"));
  bad["steps"][1]["session"]["view"]["view"] = "heatmaps";
  const std::string lesson = work_dir() + "/bad" + core::kLessonSuffix;
  std::ofstream(lesson) << bad.dump(2);

  MainWindow w(base_options());
  ASSERT_TRUE(show_settled(w));
  w.open_session(QString::fromStdString(session));
  ASSERT_TRUE(step_settled(w, s));
  const QString title = w.windowTitle();
  const QString input = w.input_dock()->editor()->toPlainText();
  const auto specs = w.variants_dock()->specs();
  const nlohmann::json state = core::session_to_json(w.current_session());
  const auto view = w.view()->canvas()->settings().view;
  const auto analysis = w.analysis();

  LessonPlayer* player = w.lesson_player();
  for (int how = 0; how < 2; ++how) {
    QString err;
    if (how == 0) {
      err = player->open(QString::fromStdString(lesson));
    } else {  // dropped on the window
      QMimeData mime;
      mime.setUrls({QUrl::fromLocalFile(QString::fromStdString(lesson))});
      QDropEvent drop(QPointF(100, 100), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
      QApplication::sendEvent(&w, &drop);
      err = player->last_error();
    }
    SCOPED_TRACE(how == 0 ? "opened" : "dropped");
    EXPECT_TRUE(err.contains(QString::fromStdString(lesson))) << err.toStdString();
    EXPECT_TRUE(err.contains("step 2")) << err.toStdString();
    EXPECT_TRUE(err.contains("session.view.view")) << err.toStdString();
    QApplication::processEvents();
    EXPECT_EQ(w.windowTitle(), title);
    EXPECT_EQ(w.input_dock()->editor()->toPlainText(), input);
    EXPECT_EQ(w.variants_dock()->specs(), specs);
    EXPECT_EQ(core::session_to_json(w.current_session()), state);
    EXPECT_EQ(w.view()->canvas()->settings().view, view);
    EXPECT_EQ(w.analysis(), analysis) << "the analysis was redone";
    EXPECT_FALSE(player->playing());
  }
  for (QWidget* box : QApplication::topLevelWidgets())
    if (box->inherits("QMessageBox")) box->close();
}

// Recording: Add step stores the current session and caption; Save lesson as writes a file that
// loads back equal.
TEST(GuiLessons, RecordedStepsSaveAndReload) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  MainWindow w(base_options());
  ASSERT_TRUE(show_settled(w));
  LessonPlayer* player = w.lesson_player();
  player->add_step("First", "The **bundled** sample.");
  w.input_dock()->editor()->setPlainText("And God said, Let there be light.");
  ASSERT_TRUE(wait_until([&] { return w.worker_idle() && w.settled(); }, 60000));
  player->add_step("", "A shorter text.");
  ASSERT_EQ(player->steps(), 2);
  const std::string path = work_dir() + "/recorded" + core::kLessonSuffix;
  ASSERT_EQ(player->save_as(QString::fromStdString(path)), "");
  const core::Lesson l = core::load_lesson(path);
  ASSERT_EQ(l.steps.size(), 2u);
  EXPECT_EQ(l.steps[0].title, "First");
  EXPECT_EQ(l.steps[0].caption, "The **bundled** sample.");
  EXPECT_EQ(l.steps[1].session.input.text, "And God said, Let there be light.");
  EXPECT_EQ(core::lesson_to_json(l), core::lesson_to_json(player->lesson()));
  ASSERT_EQ(player->open(QString::fromStdString(path)), "");
  ASSERT_TRUE(step_settled(w, l.steps[0].session));
  EXPECT_NE(w.analysis()->session.input.text, l.steps[1].session.input.text);
}

}  // namespace
}  // namespace attn::gui::test

int main(int argc, char** argv) {
  return attn::gui::test::run_gui_tests(argc, argv, "test_gui_lessons",
                                        &attn::gui::test::g_instance);
}
