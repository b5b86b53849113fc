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
      cv_.wait(lock, [&] { return stop_ || pending_analysis_ || pending_tiles_ || !sweep_todo_.empty(); });
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
    sweep_left_ = int(sweep_todo_.size());
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
        if (fresh) {
          sweep_todo_ = ar->sweep ? sweep_specs(*a) : std::vector<std::string>{};
          sweep_done_.clear();
        }
      } else if (tj && current_ && tj->generation == current_->generation) {
        auto tiles = build_tiles(*current_, tj->q0, tj->q1, tj->k0, tj->k1, tj->w, tj->h, &cancel_tiles_);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (handlers_.tiles) handlers_.tiles(tj->generation, std::move(tiles), s);
      } else if (!tj && !sweep_todo_.empty() && current_) {
        if (handlers_.progress)
          handlers_.progress("trade-off sweep: " + std::to_string(sweep_todo_.size()) + " settings left");
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
    sweep_left_ = int(sweep_todo_.size());
    busy_ = false;
    if (handlers_.progress) handlers_.progress("");
  }
}

}  // namespace attn::gui
