#include "app/gui/analysis_worker.h"

#include <chrono>

#include "compute/error.h"

namespace attn::gui {

AnalysisWorker::AnalysisWorker(Handlers h) : handlers_(std::move(h)) {
  thread_ = std::thread([this] { loop(); });
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
      cv_.wait(lock, [&] { return stop_ || pending_analysis_ || pending_tiles_; });
      if (stop_) return;
      if (pending_analysis_) {
        ar = std::move(pending_analysis_);
        pending_analysis_.reset();
        cancel_analysis_ = false;
      } else {
        tj = std::move(pending_tiles_);
        pending_tiles_.reset();
        cancel_tiles_ = false;
      }
    }
    busy_ = true;
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
        if (fresh && ar->sweep && !a->request.variants.empty()) {
          if (handlers_.progress) handlers_.progress("trade-off sweep...");
          auto b = std::make_shared<Analysis>(*a);
          b->sweep = run_sweep(*b, &cancel_analysis_);
          current_ = b;  // same generation: tiles stay valid
          if (handlers_.analysis) handlers_.analysis(b, -1);
        }
      } else if (tj && current_ && tj->generation == current_->generation) {
        auto tiles = build_tiles(*current_, tj->q0, tj->q1, tj->k0, tj->k1, tj->w, tj->h, &cancel_tiles_);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (handlers_.tiles) handlers_.tiles(tj->generation, std::move(tiles), s);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Cancelled && handlers_.error) handlers_.error(e.what());
    } catch (const std::exception& e) {
      if (handlers_.error) handlers_.error(e.what());
    }
    busy_ = false;
    if (handlers_.progress) handlers_.progress("");
  }
}

}  // namespace attn::gui
