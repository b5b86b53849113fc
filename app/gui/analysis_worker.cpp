#include "app/gui/analysis_worker.h"

#include <chrono>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "compute/error.h"

namespace attn::gui {

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

void AnalysisWorker::request_analysis(const AnalysisRequest& r) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_analysis_ = r;
    pending_tiles_.reset();
    cancel_analysis_ = true;
    cancel_tiles_ = true;
  }
  cv_.notify_all();
}

void AnalysisWorker::request_tiles(const TileJob& t) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_tiles_ = t;
    cancel_tiles_ = true;
  }
  cv_.notify_all();
}

void AnalysisWorker::loop() {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    std::optional<AnalysisRequest> ar;
    std::optional<TileJob> tj;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Background work (metrics, sweep) waits a moment after an analysis is posted, so that the
      // GUI's first tile request for it goes first.
      auto background = [&] {
        return metrics_todo_ || (!sweep_todo_.empty() && current_ && current_->has_metrics());
      };
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
    }
    busy_ = true;
    sweep_left_ = int(sweep_todo_.size()) + (metrics_todo_ ? 1 : 0);
    const auto t0 = Clock::now();
    try {
      if (ar) {
        if (handlers_.progress) handlers_.progress("running model and variants...");
        auto a = run_analysis(*ar, models_, &cancel_analysis_, current_);
        const bool fresh = !current_ || current_->request.heavy_key() != ar->heavy_key();
        a->generation = ++generation_;
        current_ = a;
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (handlers_.analysis) handlers_.analysis(a, s);
        posted_at_ = Clock::now();
        metrics_todo_ = !a->has_metrics();
        if (fresh) {
          sweep_todo_ = ar->sweep ? sweep_specs(*a) : std::vector<std::string>{};
          sweep_done_.clear();
        }
      } else if (tj && current_ && tj->generation == current_->generation) {
        auto tiles =
            build_tiles(*current_, tj->q0, tj->q1, tj->k0, tj->k1, tj->w, tj->h, &cancel_tiles_);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (handlers_.tiles) handlers_.tiles(tj->generation, std::move(tiles), s);
      } else if (!tj && metrics_todo_ && current_) {
        if (handlers_.progress) handlers_.progress("comparing with the dense reference...");
        auto b = std::make_shared<Analysis>(*current_);
        metrics_todo_ = false;  // a failure is reported once, not retried forever
        try {
          add_metrics(*b, &cancel_analysis_);
        } catch (const Error& e) {
          if (e.code() == ErrorCode::Cancelled) metrics_todo_ = true;
          throw;
        }
        current_ = b;  // same generation: tiles stay valid
        if (handlers_.analysis) handlers_.analysis(b, -1);
      } else if (!tj && !sweep_todo_.empty() && current_ && current_->has_metrics()) {
        if (handlers_.progress)
          handlers_.progress("trade-off sweep: " + std::to_string(sweep_todo_.size()) +
                             " settings left");
        const std::string spec = sweep_todo_.front();
        sweep_todo_.erase(sweep_todo_.begin());
        if (auto pt = sweep_point(*current_, spec, &cancel_analysis_)) sweep_done_.push_back(*pt);
        if (sweep_todo_.empty()) {
          auto b = std::make_shared<Analysis>(*current_);
          b->sweep = sweep_done_;
          current_ = b;  // same generation: tiles stay valid
          if (handlers_.analysis) handlers_.analysis(b, -1);
        }
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Cancelled && handlers_.error) handlers_.error(e.what());
    } catch (const std::exception& e) {
      if (handlers_.error) handlers_.error(e.what());
    }
    sweep_left_ = int(sweep_todo_.size()) + (metrics_todo_ ? 1 : 0);
    busy_ = false;
    if (handlers_.progress) handlers_.progress("");
  }
}

}  // namespace attn::gui
