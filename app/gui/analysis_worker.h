// One worker thread between the GUI and the analysis core (RenderDoc's replay-thread pattern):
// requests are tagged by kind, the newest replaces any queued one of its kind, and a new session
// cancels the running work (core::Options::cancel). The core's stages are published one by one
// (variants first, then comparisons, end to end and the trade-off sweep in the background,
// each interruptible by tile requests). Handlers run on the worker thread; the GUI marshals them
// to its own thread.
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

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/views.h"
#include "render/document.h"

namespace attn::gui {

struct TileJob {
  uint64_t generation = 0;
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0, w = 0, h = 0;
};

class AnalysisWorker {
 public:
  // Per-head comparisons above this many tokens are left out, to stay live on long inputs.
  static constexpr int kPerHeadMaxTokens = 1024;
  // From this many tokens on the selected head is shown first, the other heads follow.
  static constexpr int kPreviewTokens = 8192;

  struct Handlers {
    // A new or refined analysis; `seconds` is the time to the first heatmaps for a new
    // generation, < 0 for a background refinement (same generation: tiles stay valid).
    std::function<void(std::shared_ptr<const core::Analysis>, double seconds)> analysis;
    std::function<void(uint64_t generation, std::vector<render::PanelTile>, double seconds)> tiles;
    // Trade-off points of the automatic sweep so far, for `generation`.
    std::function<void(uint64_t generation, std::vector<core::TradeoffPoint>)> sweep;
    std::function<void(const std::string& message)> error;
    std::function<void(const std::string& stage)> progress;
  };
  explicit AnalysisWorker(Handlers h);
  ~AnalysisWorker();
  AnalysisWorker(const AnalysisWorker&) = delete;
  AnalysisWorker& operator=(const AnalysisWorker&) = delete;

  // Replaces any queued session and cancels the running job.
  void request_analysis(const core::Session& s, const std::string& session_path);
  // Replaces any queued tile job; cancels running tiles (between panels).
  void request_tiles(const TileJob& t);
  // Cancels the running job and returns once it has stopped; the queue is kept and a cancelled
  // background stage runs again later. For a Vulkan device about to go away.
  void interrupt();
  bool busy() const { return busy_.load(); }
  // Nothing running or queued, the background stages included.
  bool idle() const { return !busy_.load() && background_left_.load() == 0; }

 private:
  void loop();
  // Runs one background step of current_ (the other heads of a preview, comparisons, end to
  // end, one sweep point).
  void background_step();
  int background_count() const;

  Handlers handlers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;  // a job ended (interrupt() waits on it)
  uint64_t jobs_done_ = 0;           // guarded by mutex_
  std::optional<std::pair<core::Session, std::string>> pending_analysis_;
  std::optional<TileJob> pending_tiles_;
  bool stop_ = false;
  std::atomic<bool> cancel_analysis_{false}, cancel_tiles_{false};
  std::atomic<bool> busy_{false};  // set and cleared under mutex_
  std::atomic<int> background_left_{0};
  // Worker thread only.
  std::shared_ptr<const core::Analysis> current_;
  bool full_todo_ = false, metrics_todo_ = false, e2e_todo_ = false;
  std::vector<std::string> sweep_todo_;
  std::vector<core::TradeoffPoint> sweep_done_;
  uint64_t generation_ = 0;
  std::chrono::steady_clock::time_point posted_at_;
  std::thread thread_;
};

}  // namespace attn::gui
