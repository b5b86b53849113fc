#include "app/gui/analysis_worker.h"

#include <chrono>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdio>
#include <cstdlib>

#include "app/core/analysis/evaluate.h"
#include "app/core/analysis/interactive.h"
#include "compute/error.h"

namespace attn::gui {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ATTNSCOPE_GUI_TRACE=1: one line per job on stderr, to see where a slow update goes.
void trace(const char* what, Clock::time_point t0) {
  static const bool on = std::getenv("ATTNSCOPE_GUI_TRACE") != nullptr;
  if (on) std::fprintf(stderr, "[worker] %s %.1f ms\n", what, since(t0) * 1e3);
}

}  // namespace

AnalysisWorker::AnalysisWorker(Handlers h) : handlers_(std::move(h)) {
  thread_ = std::thread([this] {
#ifdef __linux__
    // Below the GUI and the software rasteriser: frames keep coming while the core computes.
    // Linux gives each thread its own nice value, inherited by the threads it starts.
    setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 10);
#endif
    loop();
  });
}

AnalysisWorker::~AnalysisWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    cancel_analysis_ = true;
    cancel_tiles_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AnalysisWorker::request_analysis(const core::Session& s, const std::string& session_path) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_analysis_ = std::make_pair(s, session_path);
    pending_tiles_.reset();
    cancel_analysis_ = true;
    cancel_tiles_ = true;
  }
  cv_.notify_all();
}

void AnalysisWorker::interrupt() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!busy_) return;
  const uint64_t job = jobs_done_;
  cancel_analysis_ = true;
  cancel_tiles_ = true;
  done_cv_.wait(lock, [&] { return jobs_done_ != job; });
}

void AnalysisWorker::request_tiles(const TileJob& t) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_tiles_ = t;
    cancel_tiles_ = true;
  }
  cv_.notify_all();
}

int AnalysisWorker::background_count() const {
  return int(sweep_todo_.size()) + (full_todo_ ? 1 : 0) + (metrics_todo_ ? 1 : 0) +
         (e2e_todo_ ? 1 : 0);
}

void AnalysisWorker::background_step() {
  core::Options o;
  o.cancel = &cancel_analysis_;
  o.per_head_max_tokens = kPerHeadMaxTokens;
  // One stage: its flag is cleared first (a failure is reported once, not retried forever) and
  // set again when the stage was cancelled, so that it runs later.
  auto stage = [&](bool& todo, const char* what, auto&& run) {
    if (handlers_.progress) handlers_.progress(what);
    todo = false;
    try {
      run();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Cancelled) todo = true;
      throw;
    }
    if (handlers_.analysis) handlers_.analysis(current_, -1);
  };
  if (full_todo_) {
    stage(full_todo_, "the other heads...", [&] {
      auto a = core::run_variants(*core::full_heads(*current_, o), o);
      a->generation = ++generation_;  // other problems: the tiles are asked for again
      current_ = a;
      sweep_todo_ = core::auto_sweep_specs(*current_, current_->n_tokens() > 2048 ? 4 : 7);
    });
  } else if (metrics_todo_) {
    stage(metrics_todo_, "comparing with the dense reference...",
          [&] { current_ = core::add_metrics(*current_, o); });
  } else if (e2e_todo_) {
    stage(e2e_todo_, "substituting the variants into the model...",
          [&] { current_ = core::add_end_to_end(*current_, o); });
  } else if (!sweep_todo_.empty()) {
    if (handlers_.progress)
      handlers_.progress("trade-off sweep: " + std::to_string(sweep_todo_.size()) +
                         " settings left");
    const std::string spec = sweep_todo_.front();
    sweep_todo_.erase(sweep_todo_.begin());
    try {
      sweep_done_.push_back(core::evaluate(*current_, spec, current_->model != nullptr, o));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Cancelled) {
        sweep_todo_.insert(sweep_todo_.begin(), spec);
        throw;
      }  // a setting this input cannot take is not a point
    }
    if (sweep_todo_.empty() && handlers_.sweep) handlers_.sweep(current_->generation, sweep_done_);
  }
}

void AnalysisWorker::loop() {
  for (;;) {
    std::optional<std::pair<core::Session, std::string>> ar;
    std::optional<TileJob> tj;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Background work waits a moment after an analysis is posted, so that the GUI's first
      // tile request for it goes first.
      auto background = [&] { return current_ && background_count() > 0; };
      while (!(stop_ || pending_analysis_ || pending_tiles_)) {
        if (!background()) {
          cv_.wait(lock);
          continue;
        }
        const auto wake = posted_at_ + std::chrono::milliseconds(400);
        if (Clock::now() >= wake) break;
        cv_.wait_until(lock, wake);
      }
      if (stop_) return;
      if (pending_analysis_) {
        ar = std::move(pending_analysis_);
        pending_analysis_.reset();
        cancel_analysis_ = false;
      } else if (pending_tiles_) {
        tj = std::move(pending_tiles_);
        pending_tiles_.reset();
        cancel_tiles_ = false;
      } else {
        cancel_analysis_ = false;
      }
      busy_ = true;
    }
    background_left_ = background_count();
    const auto t0 = Clock::now();
    try {
      if (ar) {
        const core::Session& s = ar->first;
        if (current_ && core::heavy_key(current_->session) == core::heavy_key(s) &&
            current_->variants_ran() && (!current_->preview() || s.head == current_->head_offset)) {
          auto a = core::reselect(*current_, s);  // a new selection: nothing to recompute
          a->session_path = ar->second;
          a->generation = ++generation_;  // tiles of another head are other tiles
          current_ = a;
          if (handlers_.analysis) handlers_.analysis(current_, since(t0));
        } else {
          core::Options o;
          o.cancel = &cancel_analysis_;
          o.verify_hashes = false;  // the GUI warns about hashes when it opens a session
          o.progress = handlers_.progress;
          o.preview_tokens = kPreviewTokens;
          auto a = core::open(s, ar->second, o);
          a = core::run_variants(*a, o);
          a->generation = ++generation_;
          current_ = a;
          trace("open + variants", t0);
          if (handlers_.analysis) handlers_.analysis(current_, since(t0));
          full_todo_ = current_->preview();
          metrics_todo_ = true;
          e2e_todo_ = current_->model != nullptr && current_->panels.size() > 1;
          // Long problems get fewer sweep points: each costs ~N^2 d per layer. A preview's
          // sweep waits for every head.
          sweep_todo_ = current_->preview() ? std::vector<std::string>{}
                                            : core::auto_sweep_specs(
                                                  *current_, current_->n_tokens() > 2048 ? 4 : 7);
          sweep_done_.clear();
        }
        posted_at_ = Clock::now();
      } else if (tj && current_ && tj->generation == current_->generation) {
        auto t =
            core::tiles(*current_, tj->q0, tj->q1, tj->k0, tj->k1, tj->w, tj->h, &cancel_tiles_);
        trace("tiles", t0);
        if (handlers_.tiles) handlers_.tiles(tj->generation, std::move(t), since(t0));
      } else if (!tj && current_ && background_count() > 0) {
        background_step();
        trace("background step", t0);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Cancelled && handlers_.error) handlers_.error(e.what());
    } catch (const std::exception& e) {
      if (handlers_.error) handlers_.error(e.what());
    }
    background_left_ = background_count();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = false;
      ++jobs_done_;
    }
    done_cv_.notify_all();
    if (handlers_.progress) handlers_.progress("");
  }
}

}  // namespace attn::gui
