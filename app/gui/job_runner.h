// The one way the GUI runs work in the background (RenderDoc's ReplayManager::AsyncInvoke): jobs
// run one at a time, in order, on the runner's worker thread. Each job has a tag: submitting a job
// drops a queued one with the same tag and cancels a running one (a stale request is never worth
// finishing). A job gets a JobContext: a cancellation flag to hand to the core's long loops, and a
// progress reporter. Its result is posted back to the GUI thread; a cancelled job delivers nothing.
// Any exception a job throws (attn::Error, std::exception or anything else) becomes a message for
// the GUI thread, never a crash. Destroying the runner cancels everything and waits at most
// kStopWaitMs for the running job; one still running then finishes on its own and posts nothing,
// so a window closes at once and no handler touches a destroyed widget.
//
//   JobRunner runner;
//   runner.submit("scan", [model](JobContext& ctx) { return scan(*model, &ctx.cancel_flag()); },
//                 [this](Scan s) { show(s); },                    // GUI thread, with the result
//                 {.failed = [this](const QString& m) { label->setText(m); }});
#pragma once
#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace attn::gui {

// What a running job sees; lives on the worker thread for the job's duration.
class JobContext {
 public:
  // Set when the job is cancelled (cancel(), a newer job with its tag, interrupt(), the runner
  // going away). The core's loops take its address (core::Options::cancel and friends).
  const std::atomic<bool>& cancel_flag() const { return *cancel_; }
  bool cancelled() const { return cancel_->load(); }
  // Throws Error(Cancelled) once cancelled: for a job's own loops, between steps.
  void check() const;
  // Posted to the GUI thread, to the job's `progress` hook (dropped once the job is cancelled).
  void progress(const QString& text) const;

 private:
  friend class JobRunner;
  JobContext(std::shared_ptr<std::atomic<bool>> cancel, std::function<void(const QString&)> post)
      : cancel_(std::move(cancel)), post_(std::move(post)) {}
  std::shared_ptr<std::atomic<bool>> cancel_;
  std::function<void(const QString&)> post_;
};

// How a job ended, as its `ended` hook hears it.
enum class JobEnd { Done, Failed, Cancelled };

// GUI-thread hooks of one job besides its result; all optional.
struct JobHooks {
  std::function<void(const QString& message)> failed;  // an exception, Error(Cancelled) aside
  std::function<void(const QString& text)> progress;   // JobContext::progress()
  std::function<void(JobEnd)> ended;                   // last, however the job ended
};

class JobRunner {
 public:
  // How long the destructor waits for the running job before leaving it to finish alone.
  static constexpr int kStopWaitMs = 500;

  // `background`: the worker runs below the GUI's priority (Linux nice 10), so frames keep
  // coming while it computes.
  explicit JobRunner(bool background = false);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // The type-erased job: `work` runs on the worker thread and returns what then runs on the GUI
  // thread with its result (not when the job was cancelled in between).
  using Work = std::function<std::function<void()>(JobContext&)>;
  void submit_work(const std::string& tag, Work work, JobHooks hooks = {});

  // `work(JobContext&)` on the worker thread, then `done(result)` (or `done()` for a void job) on
  // the GUI thread.
  template <class F, class Done>
  void submit(const std::string& tag, F work, Done done, JobHooks hooks = {}) {
    using R = std::invoke_result_t<F&, JobContext&>;
    submit_work(
        tag,
        [work = std::move(work),
         done = std::move(done)](JobContext& ctx) mutable -> std::function<void()> {
          if constexpr (std::is_void_v<R>) {
            work(ctx);
            return [done] { done(); };
          } else {
            auto r = std::make_shared<R>(work(ctx));
            return [done, r] { done(std::move(*r)); };
          }
        },
        std::move(hooks));
  }

  // Drops queued jobs with `tag` and cancels the running one if it has that tag.
  void cancel(const std::string& tag);
  // Drops every queued job and cancels the running one.
  void cancel_all();
  // Cancels the running job and returns once its work has returned (the queue is kept): for a
  // resource the job may be using that is about to go away (the view's Vulkan device).
  void interrupt();
  // Nothing queued or running.
  bool idle() const;
  // Whether a job with `tag` is queued or running.
  bool has(const std::string& tag) const;

  // Waits up to `ms` for the worker threads of destroyed runners that were still finishing a
  // job; true when none is left. For the end of main(), before static destructors run.
  static bool wait_for_detached(int ms);

 private:
  struct Shared;
  static void loop(std::shared_ptr<Shared> s);
  std::shared_ptr<Shared> shared_;
};

}  // namespace attn::gui
