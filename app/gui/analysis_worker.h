// One worker thread between the GUI and the compute core (RenderDoc's replay-thread pattern):
// requests are tagged by kind, the newest replaces any queued one of its kind, and a new analysis
// cancels the running one (compute's RunOptions::cancel). Handlers run on the worker thread;
// the GUI marshals them to its own thread.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "app/gui/analysis.h"

namespace attn::gui {

struct TileJob {
  uint64_t generation = 0;
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0, w = 0, h = 0;
};

class AnalysisWorker {
 public:
  struct Handlers {
    std::function<void(std::shared_ptr<const Analysis>, double seconds)> analysis;
    std::function<void(uint64_t generation, std::vector<render::PanelTile>, double seconds)> tiles;
    std::function<void(const std::string& message)> error;
    std::function<void(const std::string& stage)> progress;
  };
  explicit AnalysisWorker(Handlers h);
  ~AnalysisWorker();
  AnalysisWorker(const AnalysisWorker&) = delete;
  AnalysisWorker& operator=(const AnalysisWorker&) = delete;

  // Replaces any queued analysis and cancels the running job.
  void request_analysis(const AnalysisRequest& r);
  // Replaces any queued tile job; cancels running tiles (between panels).
  void request_tiles(const TileJob& t);
  bool busy() const { return busy_.load(); }
  // Nothing running or queued, the sweep included.
  bool idle() const { return !busy_.load() && sweep_left_.load() == 0; }

 private:
  void loop();

  Handlers handlers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<AnalysisRequest> pending_analysis_;
  std::optional<TileJob> pending_tiles_;
  bool stop_ = false;
  std::atomic<bool> cancel_analysis_{false}, cancel_tiles_{false};
  std::atomic<bool> busy_{false};
  std::atomic<int> sweep_left_{0};
  std::shared_ptr<const Analysis> current_;  // worker thread only
  // Trade-off sweep of current_, one point per loop turn after any analysis or tile job.
  bool metrics_todo_ = false;
  std::vector<std::string> sweep_todo_;
  std::vector<render::TradeoffPoint> sweep_done_;
  ModelCache models_;  // worker thread only
  uint64_t generation_ = 0;
  std::chrono::steady_clock::time_point posted_at_;
  std::thread thread_;
};

}  // namespace attn::gui
