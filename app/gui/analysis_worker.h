// The live analysis as jobs on one JobRunner (app/gui/job_runner.h; RenderDoc's replay-thread
// pattern): an analysis request drops every queued or running job, a tile request replaces the
// tiles asked for before. The core's stages are published one by one: the variants first, then
// the other heads of a preview, comparisons, end to end and the trade-off sweep as background
// jobs, one at a time once nothing else waits (tile requests go first). Handlers run on the GUI
// thread.
#pragma once
#include <QTimer>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/views.h"
#include "app/gui/job_runner.h"
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

  // Called on the GUI thread.
  struct Handlers {
    // A new or refined analysis; `seconds` is the time to the first heatmaps for a new
    // generation, < 0 for a background refinement (same generation: tiles stay valid).
    std::function<void(std::shared_ptr<const core::Analysis>, double seconds)> analysis;
    std::function<void(uint64_t generation, std::vector<render::PanelTile>, double seconds)> tiles;
    // Trade-off points of the automatic sweep so far, for `generation`.
    std::function<void(uint64_t generation, std::vector<core::TradeoffPoint>)> sweep;
    std::function<void(const std::string& message)> error;
    // The stage running ("" when a job ended).
    std::function<void(const std::string& stage)> progress;
  };
  explicit AnalysisWorker(Handlers h);
  ~AnalysisWorker();
  AnalysisWorker(const AnalysisWorker&) = delete;
  AnalysisWorker& operator=(const AnalysisWorker&) = delete;

  // Drops every queued job and cancels the running one.
  void request_analysis(const core::Session& s, const std::string& session_path);
  // Replaces any queued tile job; cancels running tiles (between panels).
  void request_tiles(const TileJob& t);
  // Cancels the running job and returns once it has stopped; a cancelled background stage runs
  // again later. For a Vulkan device about to go away.
  void interrupt();
  // Nothing running or queued, the background stages included.
  bool idle() const;

  // The pipeline between jobs: touched only by the jobs, which run one at a time.
  struct State;

 private:
  JobHooks hooks();
  // After a job: the next background stage once nothing else waits, at least 400 ms after an
  // analysis was shown (so that the GUI's first tile request for it goes first).
  void schedule_background();
  void submit_background();

  Handlers handlers_;
  std::shared_ptr<State> state_;
  JobRunner runner_{true};
  QTimer background_timer_;
  std::chrono::steady_clock::time_point posted_at_;
};

}  // namespace attn::gui
