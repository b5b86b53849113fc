// The GUI's job runner on its own (a QCoreApplication, no window): results come back on the GUI
// thread, every kind of exception becomes a message and the next job still runs, cancelled and
// stale jobs deliver nothing, and destroying a runner never waits for a job that ignores its
// cancellation.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "app/gui/job_runner.h"
#include "compute/error.h"
#include "gui_driver.h"

namespace attn::gui {
namespace {

using test::wait_until;

// Processes events for `ms` (what was posted by then is delivered).
void pump(int ms) {
  wait_until([] { return false; }, ms);
}

// Records a job's GUI-thread hooks.
struct Seen {
  int done = 0, failed = 0;
  QString message;
  std::vector<JobEnd> ended;
  std::vector<QString> progress;
  JobHooks hooks() {
    return {[this](const QString& m) {
              ++failed;
              message = m;
            },
            [this](const QString& p) { progress.push_back(p); },
            [this](JobEnd e) { ended.push_back(e); }};
  }
};

TEST(JobRunner, DeliversTheResultOnTheGuiThread) {
  JobRunner runner;
  Seen seen;
  int value = 0;
  std::thread::id worker, gui;
  runner.submit(
      "answer",
      [&](JobContext&) {
        worker = std::this_thread::get_id();
        return 42;
      },
      [&](int v) {
        value = v;
        gui = std::this_thread::get_id();
        ++seen.done;
      },
      seen.hooks());
  ASSERT_TRUE(wait_until([&] { return !seen.ended.empty(); }, 5000));
  EXPECT_EQ(value, 42);
  EXPECT_EQ(gui, std::this_thread::get_id());
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_EQ(seen.ended, std::vector<JobEnd>{JobEnd::Done});
  EXPECT_EQ(seen.failed, 0);
  EXPECT_TRUE(runner.idle());
}

// A job's end reaches the GUI thread only once the runner is idle again, its captures released:
// an end hook that starts more work when the runner is idle (the analysis worker's background
// stages) must never find it busy with the job that just ended, or that work never starts.
TEST(JobRunner, IsIdleWhenAJobsEndArrives) {
  struct SlowRelease {
    ~SlowRelease() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }
  };
  JobRunner runner;
  int ends = 0;
  bool idle_at_end = false;
  JobHooks hooks;
  hooks.ended = [&](JobEnd) {
    idle_at_end = runner.idle();
    ++ends;
  };
  // The job's work holds the only reference: it is released on the worker thread, slowly.
  runner.submit_work(
      "slow release",
      [slow = std::make_shared<SlowRelease>()](JobContext&) -> std::function<void()> {
        (void)slow;
        return [] {};
      },
      hooks);
  ASSERT_TRUE(wait_until([&] { return ends == 1; }, 5000));
  EXPECT_TRUE(idle_at_end);
}

TEST(JobRunner, EveryKindOfExceptionIsAMessageAndTheNextJobRuns) {
  JobRunner runner;
  Seen runtime, integer, error, cancelled, handler, next;
  auto never = [](int) { ADD_FAILURE() << "a failed job delivered a result"; };
  runner.submit(
      "a", [](JobContext&) -> int { throw std::runtime_error("disk on fire"); }, never,
      runtime.hooks());
  runner.submit(
      "b", [](JobContext&) -> int { throw 7; }, never, integer.hooks());
  runner.submit(
      "c", [](JobContext&) -> int { throw Error(ErrorCode::InvalidArgument, "bad head L9H9"); },
      never, error.hooks());
  // Error(Cancelled) is a cancellation, not a failure.
  runner.submit(
      "d", [](JobContext&) -> int { throw Error(ErrorCode::Cancelled, "stopped"); }, never,
      cancelled.hooks());
  // The result's handler throwing on the GUI thread fails the job too.
  runner.submit(
      "e", [](JobContext&) { return 1; }, [](int) { throw std::logic_error("handler broke"); },
      handler.hooks());
  int value = 0;
  runner.submit(
      "f", [](JobContext&) { return 5; }, [&](int v) { value = v; }, next.hooks());
  ASSERT_TRUE(wait_until([&] { return !next.ended.empty(); }, 5000));
  EXPECT_EQ(runtime.message, "disk on fire");
  EXPECT_EQ(runtime.ended, std::vector<JobEnd>{JobEnd::Failed});
  EXPECT_EQ(integer.failed, 1);
  EXPECT_TRUE(integer.message.contains("not a std::exception")) << integer.message.toStdString();
  EXPECT_EQ(error.message, "bad head L9H9");
  EXPECT_EQ(cancelled.failed, 0);
  EXPECT_EQ(cancelled.ended, std::vector<JobEnd>{JobEnd::Cancelled});
  EXPECT_EQ(handler.message, "handler broke");
  EXPECT_EQ(handler.ended, std::vector<JobEnd>{JobEnd::Failed});
  EXPECT_EQ(value, 5);
  EXPECT_EQ(next.ended, std::vector<JobEnd>{JobEnd::Done});
}

TEST(JobRunner, ACancelledJobsResultIsNeverDelivered) {
  JobRunner runner;
  Seen running, finished;
  std::atomic<bool> started{false};
  // A job that notices the cancellation and still returns a value: the value is dropped.
  runner.submit(
      "scan",
      [&](JobContext& ctx) {
        started = true;
        while (!ctx.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return 1;
      },
      [&](int) { ++running.done; }, running.hooks());
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 5000));
  runner.cancel("scan");
  ASSERT_TRUE(wait_until([&] { return !running.ended.empty(); }, 5000));
  EXPECT_EQ(running.done, 0);
  EXPECT_EQ(running.ended, std::vector<JobEnd>{JobEnd::Cancelled});
  // A job whose result is already posted when it is cancelled: the GUI thread drops it.
  runner.submit(
      "quick", [](JobContext&) { return 2; }, [&](int) { ++finished.done; }, finished.hooks());
  for (int i = 0; i < 5000 && !runner.idle(); ++i)  // no events processed meanwhile
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(runner.idle());
  runner.cancel("quick");
  pump(100);
  EXPECT_EQ(finished.done, 0);
  EXPECT_EQ(finished.ended, std::vector<JobEnd>{JobEnd::Cancelled});
}

TEST(JobRunner, ANewJobWithTheSameTagDropsTheStaleOnes) {
  JobRunner runner;
  Seen first, queued, other, last;
  std::atomic<bool> started{false};
  std::vector<std::string> order;
  runner.submit(
      "tiles",
      [&](JobContext& ctx) {
        started = true;
        while (!ctx.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ctx.check();
        return 0;
      },
      [&](int) { order.push_back("first"); }, first.hooks());
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 5000));
  EXPECT_TRUE(runner.has("tiles"));
  runner.submit(
      "tiles", [](JobContext&) { return 0; }, [&](int) { order.push_back("queued"); },
      queued.hooks());
  runner.submit(
      "sweep", [](JobContext&) { return 0; }, [&](int) { order.push_back("other"); },
      other.hooks());
  runner.submit(
      "tiles", [](JobContext&) { return 0; }, [&](int) { order.push_back("last"); }, last.hooks());
  ASSERT_TRUE(wait_until([&] { return !last.ended.empty() && !other.ended.empty(); }, 5000));
  pump(50);
  // The running one was cancelled, the queued one dropped unrun; another tag is untouched.
  EXPECT_EQ(first.ended, std::vector<JobEnd>{JobEnd::Cancelled});
  EXPECT_TRUE(queued.ended.empty());
  EXPECT_EQ(order, (std::vector<std::string>{"other", "last"}));
}

TEST(JobRunner, ProgressReachesTheGuiThreadInOrder) {
  JobRunner runner;
  Seen seen;
  runner.submit(
      "steps",
      [](JobContext& ctx) {
        for (int i = 1; i <= 3; ++i) ctx.progress(QString("step %1").arg(i));
      },
      [] {}, seen.hooks());
  ASSERT_TRUE(wait_until([&] { return !seen.ended.empty(); }, 5000));
  EXPECT_EQ(seen.progress, (std::vector<QString>{"step 1", "step 2", "step 3"}));
}

TEST(JobRunner, InterruptWaitsForTheRunningJobAndKeepsTheQueue) {
  JobRunner runner;
  Seen running, queued;
  std::atomic<bool> started{false}, returned{false};
  runner.submit(
      "analysis",
      [&](JobContext& ctx) {
        started = true;
        while (!ctx.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        returned = true;
        ctx.check();
      },
      [&] { ++running.done; }, running.hooks());
  runner.submit(
      "tiles", [](JobContext&) {}, [&] { ++queued.done; }, queued.hooks());
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 5000));
  runner.interrupt();
  EXPECT_TRUE(returned.load());
  ASSERT_TRUE(wait_until([&] { return queued.done == 1; }, 5000));
  EXPECT_EQ(running.done, 0);
}

TEST(JobRunner, DestroyingTheRunnerNeverWaitsForAJobThatIgnoresCancellation) {
  Seen seen;
  std::atomic<bool> started{false};
  auto runner = std::make_unique<JobRunner>();
  runner->submit(
      "stubborn",
      [&started](JobContext&) {
        started = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return 3;
      },
      [&](int) { ++seen.done; }, seen.hooks());
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 5000));
  QElapsedTimer t;
  t.start();
  runner.reset();
  EXPECT_LT(t.elapsed(), 1000);
  ASSERT_TRUE(JobRunner::wait_for_detached(5000));
  pump(100);
  EXPECT_EQ(seen.done, 0);
  EXPECT_TRUE(seen.ended.empty());  // nothing at all reaches the owner once it is gone
}

TEST(JobRunner, DestroyingTheRunnerCancelsACooperativeJobAtOnce) {
  std::atomic<bool> started{false}, saw_cancel{false};
  auto runner = std::make_unique<JobRunner>();
  runner->submit(
      "scan",
      [&](JobContext& ctx) {
        started = true;
        while (!ctx.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        saw_cancel = true;
      },
      [] { ADD_FAILURE() << "delivered after destruction"; });
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 5000));
  runner.reset();
  EXPECT_TRUE(saw_cancel.load());  // waited for it, within the bound
  EXPECT_TRUE(JobRunner::wait_for_detached(0));
  pump(50);
}

}  // namespace
}  // namespace attn::gui

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  QCoreApplication app(argc, argv);
  return RUN_ALL_TESTS();
}
