// Background jobs in the real app (Qt main window, Vulkan view on lavapipe under Xvfb): a job
// that throws something other than attn::Error is shown in the Interventions dock and the next
// job runs; a stopped job's result never arrives; closing the window while a job runs returns
// within a second, whether the job notices its cancellation or not.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QVersionNumber>
#include <QVulkanInstance>
#include <QWheelEvent>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <thread>

#include "app/gui/interventions_dock.h"
#include "app/gui/job_runner.h"
#include "app/gui/main_window.h"
#include "app/gui/variants_dock.h"
#include "app/gui/vulkan_view.h"
#include "gui_driver.h"
#include "gui_test_main.h"

namespace attn::gui::test {
namespace {

QVulkanInstance* g_instance = nullptr;

// A shown window with its first analysis (the dock then knows the model).
std::unique_ptr<MainWindow> shown_window() {
  auto w = std::make_unique<MainWindow>(base_options());
  w->view()->setVulkanInstance(g_instance);
  w->show();
  wait_until([&] { return w->analysis() != nullptr || !w->last_error().isEmpty(); }, 60000);
  return w;
}

// Waits for the dock's next job_done() (true when it came within `ms`).
bool wait_job_done(InterventionsDock* dock, int& done, int ms) {
  const int before = done;
  return wait_until([&] { return done > before && !dock->busy(); }, ms);
}

TEST(GuiJobs, AJobThatThrowsAnythingIsShownAndTheNextJobRuns) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  auto w = shown_window();
  ASSERT_TRUE(w->analysis()) << w->last_error().toStdString();
  InterventionsDock* dock = w->interventions_dock();
  int done = 0;
  QObject::connect(dock, &InterventionsDock::job_done, [&] { ++done; });

  ASSERT_TRUE(
      dock->run_job("Test job", [](JobContext&) { throw std::runtime_error("disk on fire"); }));
  ASSERT_TRUE(wait_job_done(dock, done, 10000));
  EXPECT_EQ(dock->effect_label()->text(), "Test job failed: disk on fire");

  ASSERT_TRUE(dock->run_job("Odd job", [](JobContext&) { throw 42; }));
  ASSERT_TRUE(wait_job_done(dock, done, 10000));
  EXPECT_TRUE(dock->effect_label()->text().startsWith("Odd job failed: unknown error"))
      << dock->effect_label()->text().toStdString();

  // The app lives on: a plain job, then a real scan, run and deliver.
  bool delivered = false;
  ASSERT_TRUE(dock->run_job(
      "Plain job", [](JobContext&) {}, [&] { delivered = true; }));
  ASSERT_TRUE(wait_job_done(dock, done, 10000));
  EXPECT_TRUE(delivered);
  ASSERT_TRUE(dock->start_scan());
  ASSERT_TRUE(wait_until([&] { return !dock->scanning(); }, 60000));
  const auto a = w->analysis();
  EXPECT_EQ(dock->scan().size(), size_t(a->n_layers() * a->n_heads()));
  EXPECT_FALSE(dock->effect_label()->text().contains("failed"));
}

TEST(GuiJobs, AStoppedJobsResultNeverArrives) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  auto w = shown_window();
  ASSERT_TRUE(w->analysis()) << w->last_error().toStdString();
  InterventionsDock* dock = w->interventions_dock();
  int done = 0;
  QObject::connect(dock, &InterventionsDock::job_done, [&] { ++done; });
  std::atomic<bool> started{false};
  bool delivered = false;
  // It notices the stop and returns normally: what it returns is still dropped.
  ASSERT_TRUE(dock->run_job(
      "Long job",
      [&started](JobContext& ctx) {
        started = true;
        while (!ctx.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      },
      [&] { delivered = true; }));
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 10000));
  EXPECT_TRUE(dock->busy());
  EXPECT_FALSE(dock->run_job("Second job", [](JobContext&) {}));  // one at a time
  dock->stop();
  ASSERT_TRUE(wait_job_done(dock, done, 10000));
  wait_until([] { return false; }, 100);
  EXPECT_FALSE(delivered);
  EXPECT_FALSE(dock->effect_label()->text().contains("failed"));
}

// `stubborn`: the job ignores its cancellation for 3 s (a long core call without a cancel hook);
// else it stops at its next check, as the scan does between forward passes.
void expect_close_within_a_second(bool stubborn) {
  auto w = shown_window();
  ASSERT_TRUE(w->analysis()) << w->last_error().toStdString();
  InterventionsDock* dock = w->interventions_dock();
  std::atomic<bool> started{false};
  ASSERT_TRUE(dock->run_job(
      "Long scan",
      [&started, stubborn](JobContext& ctx) {
        started = true;
        if (stubborn) {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          return;
        }
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!ctx.cancelled() && std::chrono::steady_clock::now() < end)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
      },
      [] { ADD_FAILURE() << "a job's result arrived after its window closed"; }));
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 10000));
  QElapsedTimer t;
  t.start();
  w->close();
  w.reset();
  EXPECT_LT(t.elapsed(), 1000) << (stubborn ? "stubborn" : "cooperative") << " job";
  // The job ends on its own; nothing of it reaches the destroyed window.
  EXPECT_TRUE(JobRunner::wait_for_detached(10000));
  wait_until([] { return false; }, 100);
}

TEST(GuiJobs, ClosingTheWindowDuringALongJobReturnsWithinOneSecond) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  expect_close_within_a_second(false);
  expect_close_within_a_second(true);
}

}  // namespace
// A wheel over a parameter widget of the Variants dock (a variant's normaliser) that does not have
// focus leaves its value alone (the dock scrolls instead); once the widget has focus the wheel
// steps it, as usual.
TEST(GuiInput, WheelOverAnUnfocusedComboBoxChangesNothing) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  auto w = shown_window();
  ASSERT_TRUE(w->analysis()) << w->last_error().toStdString();
  QComboBox* combo = nullptr;
  for (QComboBox* c : w->variants_dock()->findChildren<QComboBox*>())
    if (c->isVisible() && c->isEnabled() && c->currentText() == "Softmax" &&
        c->currentIndex() == 0 && c->count() > 2) {
      combo = c;
      break;
    }
  ASSERT_NE(combo, nullptr) << "no enabled normaliser combo box at Softmax in the Variants dock";
  w->setFocus();
  ASSERT_FALSE(combo->hasFocus());
  const auto wheel = [&] {
    const QPointF at(combo->width() / 2.0, combo->height() / 2.0);
    QWheelEvent e(at, combo->mapToGlobal(at), QPoint(0, -120), QPoint(0, -120), Qt::NoButton,
                  Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(combo, &e);
    QApplication::processEvents();
  };
  wheel();
  EXPECT_EQ(combo->currentIndex(), 0) << "the wheel changed a combo box without focus";
  EXPECT_FALSE(combo->hasFocus()) << "the wheel gave the combo box focus";
  w->activateWindow();
  QApplication::setActiveWindow(w.get());
  combo->setFocus();
  ASSERT_TRUE(wait_until([&] { return combo->hasFocus(); }, 5000));
  wheel();
  EXPECT_EQ(combo->currentIndex(), 1) << "a focused combo box no longer follows the wheel";
}

}  // namespace attn::gui::test

int main(int argc, char** argv) {
  return attn::gui::test::run_gui_tests(argc, argv, "test_gui_jobs", &attn::gui::test::g_instance);
}
