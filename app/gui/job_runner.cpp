#include "app/gui/job_runner.h"

#include <QCoreApplication>
#include <QMetaObject>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "compute/error.h"

namespace attn::gui {
namespace {

// Worker threads of destroyed runners still finishing a job (wait_for_detached()).
std::mutex g_detached_mutex;
std::condition_variable g_detached_cv;
int g_detached = 0;

// Runs `f` on the GUI thread (the application's), unless the application is gone.
void post(std::function<void()> f) {
  if (QCoreApplication* app = QCoreApplication::instance())
    QMetaObject::invokeMethod(app, std::move(f), Qt::QueuedConnection);
}

constexpr const char* kUnknown = "unknown error (an exception that is not a std::exception)";

// Runs a GUI-thread hook; returns the message of anything it throws ("" when it returned).
QString guard(const std::function<void()>& f) {
  try {
    f();
    return {};
  } catch (const std::exception& e) {
    return e.what()[0] ? QString::fromStdString(e.what()) : QString("error");
  } catch (...) {
    return kUnknown;
  }
}

}  // namespace

void JobContext::check() const {
  if (cancelled()) throw Error(ErrorCode::Cancelled, "cancelled");
}

void JobContext::progress(const QString& text) const {
  if (!cancelled() && post_) post_(text);
}

struct JobRunner::Shared {
  struct Job {
    std::string tag;
    Work work;
    JobHooks hooks;
    std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  };
  mutable std::mutex mutex;
  std::condition_variable wake;  // a job queued, or stop
  std::condition_variable done;  // a job's work returned, or the thread exited
  std::deque<Job> queue;
  std::string running_tag;
  std::shared_ptr<std::atomic<bool>> running_cancel;  // null when nothing runs
  // Jobs whose work returned and whose result waits in the GUI thread's queue: cancel() still
  // reaches them.
  std::vector<std::pair<std::string, std::shared_ptr<std::atomic<bool>>>> posted;
  uint64_t finished = 0;  // jobs whose work returned
  bool stop = false, exited = false, detached = false;
  bool background = false;
  // GUI thread only: cleared by the destructor, so that nothing posted runs afterwards.
  bool alive = true;
};

JobRunner::JobRunner(bool background) : shared_(std::make_shared<Shared>()) {
  shared_->background = background;
  std::thread(loop, shared_).detach();  // joins through `exited`: see ~JobRunner
}

JobRunner::~JobRunner() {
  Shared& s = *shared_;
  s.alive = false;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.stop = true;
  s.queue.clear();
  if (s.running_cancel) *s.running_cancel = true;
  s.wake.notify_all();
  // A cancelled job returns at its next check; one that does not in time finishes alone (it
  // holds only what it captured and the shared state) and is counted for wait_for_detached().
  if (!s.done.wait_for(lock, std::chrono::milliseconds(kStopWaitMs), [&] { return s.exited; })) {
    s.detached = true;
    std::lock_guard<std::mutex> g(g_detached_mutex);
    ++g_detached;
  }
}

void JobRunner::submit_work(const std::string& tag, Work work, JobHooks hooks) {
  Shared& s = *shared_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto it = s.queue.begin(); it != s.queue.end();)
      it = it->tag == tag ? s.queue.erase(it) : it + 1;
    if (s.running_cancel && s.running_tag == tag) *s.running_cancel = true;
    s.queue.push_back({tag, std::move(work), std::move(hooks)});
  }
  s.wake.notify_all();
}

void JobRunner::cancel(const std::string& tag) {
  Shared& s = *shared_;
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto it = s.queue.begin(); it != s.queue.end();)
    it = it->tag == tag ? s.queue.erase(it) : it + 1;
  if (s.running_cancel && s.running_tag == tag) *s.running_cancel = true;
  for (auto& [t, flag] : s.posted)
    if (t == tag) *flag = true;
}

void JobRunner::cancel_all() {
  Shared& s = *shared_;
  std::lock_guard<std::mutex> lock(s.mutex);
  s.queue.clear();
  if (s.running_cancel) *s.running_cancel = true;
  for (auto& p : s.posted) *p.second = true;
}

void JobRunner::interrupt() {
  Shared& s = *shared_;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!s.running_cancel) return;
  *s.running_cancel = true;
  const uint64_t job = s.finished;
  s.done.wait(lock, [&] { return s.finished != job; });
}

bool JobRunner::idle() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->queue.empty() && !shared_->running_cancel;
}

bool JobRunner::has(const std::string& tag) const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (shared_->running_cancel && shared_->running_tag == tag) return true;
  for (const auto& j : shared_->queue)
    if (j.tag == tag) return true;
  return false;
}

bool JobRunner::wait_for_detached(int ms) {
  std::unique_lock<std::mutex> lock(g_detached_mutex);
  return g_detached_cv.wait_for(lock, std::chrono::milliseconds(ms),
                                [] { return g_detached == 0; });
}

void JobRunner::loop(std::shared_ptr<Shared> sp) {
  Shared& s = *sp;
#ifdef __linux__
  // Linux gives each thread its own nice value, inherited by the threads it starts.
  if (s.background) setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 10);
#endif
  for (;;) {
    Shared::Job job;
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      s.wake.wait(lock, [&] { return s.stop || !s.queue.empty(); });
      if (s.stop) break;
      job = std::move(s.queue.front());
      s.queue.pop_front();
      s.running_tag = job.tag;
      s.running_cancel = job.cancel;
    }
    const auto cancel = job.cancel;
    const auto hooks = std::make_shared<JobHooks>(std::move(job.hooks));
    JobContext ctx(cancel, [sp, cancel, hooks](const QString& text) {
      if (!hooks->progress) return;
      post([sp, cancel, hooks, text] {
        if (sp->alive && !*cancel) hooks->progress(text);
      });
    });
    std::function<void()> result;
    JobEnd end = JobEnd::Done;
    QString message;
    try {
      result = job.work(ctx);
    } catch (const Error& e) {
      end = e.code() == ErrorCode::Cancelled ? JobEnd::Cancelled : JobEnd::Failed;
      message = QString::fromStdString(e.what());
    } catch (const std::exception& e) {
      end = JobEnd::Failed;
      message = QString::fromStdString(e.what());
    } catch (...) {
      end = JobEnd::Failed;
      message = kUnknown;
    }
    const std::string tag = job.tag;
    job = {};  // the work's captures are released here, on the worker thread
    {
      // The job moves from running to posted under one lock: cancel() reaches it either way,
      // and the runner is idle before the GUI thread sees its end (a handler that schedules
      // more work when the runner is idle, like the analysis worker's, must find it idle).
      std::lock_guard<std::mutex> lock(s.mutex);
      s.posted.emplace_back(tag, cancel);
      s.running_cancel.reset();
      s.running_tag.clear();
      ++s.finished;
    }
    s.done.notify_all();
    // On the GUI thread: nothing once the runner is gone; nothing but `ended` once the job is
    // cancelled (checked there, so that a cancel() on the GUI thread wins over a result already
    // posted); and no exception from a hook escapes into the event loop (the result's handler
    // throwing makes the job a failure).
    post([sp, cancel, hooks, result = std::move(result), end, message]() mutable {
      if (!sp->alive) return;
      {
        std::lock_guard<std::mutex> lock(sp->mutex);
        auto& posted = sp->posted;
        const auto it = std::find_if(posted.begin(), posted.end(),
                                     [&](const auto& p) { return p.second == cancel; });
        if (it != posted.end()) posted.erase(it);
      }
      if (*cancel) end = JobEnd::Cancelled;
      if (end == JobEnd::Done && result) {
        message = guard(result);
        if (!message.isEmpty()) end = JobEnd::Failed;
      }
      QString late;  // a failure of the failure or end hooks themselves: stderr is all that is left
      if (end == JobEnd::Failed && hooks->failed) late = guard([&] { hooks->failed(message); });
      if (hooks->ended && late.isEmpty()) late = guard([&] { hooks->ended(end); });
      if (!late.isEmpty()) std::fprintf(stderr, "attnscope: %s\n", late.toLocal8Bit().constData());
    });
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  s.exited = true;
  s.done.notify_all();
  if (s.detached) {
    std::lock_guard<std::mutex> g(g_detached_mutex);
    --g_detached;
    g_detached_cv.notify_all();
  }
}

}  // namespace attn::gui
