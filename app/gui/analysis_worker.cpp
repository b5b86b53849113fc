#include "app/gui/analysis_worker.h"

#include <algorithm>
#include <atomic>
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

struct AnalysisWorker::State {
  std::shared_ptr<const core::Analysis> current;
  bool full_todo = false, metrics_todo = false, e2e_todo = false;
  std::vector<std::string> sweep_todo;
  std::vector<core::TradeoffPoint> sweep_done;
  uint64_t generation = 0;
  std::atomic<int> background_left{0};  // read by the GUI thread (idle())

  int background_count() const {
    return int(sweep_todo.size()) + (full_todo ? 1 : 0) + (metrics_todo ? 1 : 0) +
           (e2e_todo ? 1 : 0);
  }
};

namespace {

using State = AnalysisWorker::State;

// Opens the session, or reselects within the current analysis when only the selection changed;
// queues the background stages of a new analysis.
std::shared_ptr<const core::Analysis> run_analysis(State& st, const core::Session& s,
                                                   const std::string& session_path,
                                                   JobContext& ctx) {
  const auto t0 = Clock::now();
  if (st.current && core::heavy_key(st.current->session) == core::heavy_key(s) &&
      st.current->variants_ran() && (!st.current->preview() || s.head == st.current->head_offset)) {
    auto a = core::reselect(*st.current, s);  // a new selection: nothing to recompute
    a->session_path = session_path;
    a->generation = ++st.generation;  // tiles of another head are other tiles
    st.current = a;
    return a;
  }
  core::Options o;
  o.cancel = &ctx.cancel_flag();
  o.verify_hashes = false;  // the GUI warns about hashes when it opens a session
  o.progress = [&ctx](const std::string& m) { ctx.progress(QString::fromStdString(m)); };
  o.preview_tokens = AnalysisWorker::kPreviewTokens;
  auto a = core::open(s, session_path, o);
  a = core::run_variants(*a, o);
  a->generation = ++st.generation;
  st.current = a;
  trace("open + variants", t0);
  st.full_todo = a->preview();
  st.metrics_todo = true;
  st.e2e_todo = a->model != nullptr && a->panels.size() > 1;
  // Long problems get fewer sweep points: each costs ~N^2 d per layer. A preview's sweep waits
  // for every head.
  st.sweep_todo = a->preview() ? std::vector<std::string>{}
                               : core::auto_sweep_specs(*a, a->n_tokens() > 2048 ? 4 : 7);
  st.sweep_done.clear();
  return a;
}

// What one background step gives the GUI: a refined analysis and/or the finished sweep.
struct Refinement {
  std::shared_ptr<const core::Analysis> analysis;
  bool sweep_finished = false;
  uint64_t generation = 0;
  std::vector<core::TradeoffPoint> sweep;
};

// One background step of the current analysis (the other heads of a preview, comparisons, end
// to end, one sweep point).
Refinement background_step(State& st, JobContext& ctx) {
  core::Options o;
  o.cancel = &ctx.cancel_flag();
  o.per_head_max_tokens = AnalysisWorker::kPerHeadMaxTokens;
  Refinement out;
  // One stage: its flag is cleared first (a failure is reported once, not retried forever) and
  // set again when the stage was cancelled, so that it runs later.
  auto stage = [&](bool& todo, const char* what, auto&& run) {
    ctx.progress(what);
    todo = false;
    try {
      run();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Cancelled) todo = true;
      throw;
    }
    out.analysis = st.current;
  };
  if (st.full_todo) {
    stage(st.full_todo, "the other heads...", [&] {
      auto a = core::run_variants(*core::full_heads(*st.current, o), o);
      a->generation = ++st.generation;  // other problems: the tiles are asked for again
      st.current = a;
      st.sweep_todo = core::auto_sweep_specs(*st.current, st.current->n_tokens() > 2048 ? 4 : 7);
    });
  } else if (st.metrics_todo) {
    stage(st.metrics_todo, "comparing with the dense reference...",
          [&] { st.current = core::add_metrics(*st.current, o); });
  } else if (st.e2e_todo) {
    stage(st.e2e_todo, "substituting the variants into the model...",
          [&] { st.current = core::add_end_to_end(*st.current, o); });
  } else if (!st.sweep_todo.empty()) {
    ctx.progress("trade-off sweep: " + QString::number(st.sweep_todo.size()) + " settings left");
    const std::string spec = st.sweep_todo.front();
    st.sweep_todo.erase(st.sweep_todo.begin());
    try {
      st.sweep_done.push_back(core::evaluate(*st.current, spec, st.current->model != nullptr, o));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Cancelled) {
        st.sweep_todo.insert(st.sweep_todo.begin(), spec);
        throw;
      }  // a setting this input cannot take is not a point
    }
    if (st.sweep_todo.empty()) {
      out.sweep_finished = true;
      out.generation = st.current->generation;
      out.sweep = st.sweep_done;
    }
  }
  return out;
}

}  // namespace

AnalysisWorker::AnalysisWorker(Handlers h)
    : handlers_(std::move(h)), state_(std::make_shared<State>()) {
  background_timer_.setSingleShot(true);
  QObject::connect(&background_timer_, &QTimer::timeout, [this] { submit_background(); });
}

AnalysisWorker::~AnalysisWorker() = default;

JobHooks AnalysisWorker::hooks() {
  JobHooks h;
  h.failed = [this](const QString& m) {
    if (handlers_.error) handlers_.error(m.toStdString());
  };
  h.progress = [this](const QString& m) {
    if (handlers_.progress) handlers_.progress(m.toStdString());
  };
  h.ended = [this](JobEnd) {
    if (handlers_.progress) handlers_.progress("");
    schedule_background();
  };
  return h;
}

void AnalysisWorker::request_analysis(const core::Session& s, const std::string& session_path) {
  background_timer_.stop();
  runner_.cancel_all();
  runner_.submit_work(
      "analysis",
      [this, st = state_, s, session_path](JobContext& ctx) -> std::function<void()> {
        const auto t0 = Clock::now();
        st->background_left = st->background_count();
        auto a = run_analysis(*st, s, session_path, ctx);
        st->background_left = st->background_count();
        return [this, a, seconds = since(t0)] {
          posted_at_ = Clock::now();
          if (handlers_.analysis) handlers_.analysis(a, seconds);
        };
      },
      hooks());
}

void AnalysisWorker::request_tiles(const TileJob& t) {
  runner_.submit_work(
      "tiles",
      [this, st = state_, t](JobContext& ctx) -> std::function<void()> {
        if (!st->current || t.generation != st->current->generation) return {};
        const auto t0 = Clock::now();
        auto tiles = std::make_shared<std::vector<render::PanelTile>>(
            core::tiles(*st->current, t.q0, t.q1, t.k0, t.k1, t.w, t.h, &ctx.cancel_flag()));
        trace("tiles", t0);
        return [this, g = t.generation, tiles, seconds = since(t0)] {
          if (handlers_.tiles) handlers_.tiles(g, std::move(*tiles), seconds);
        };
      },
      hooks());
}

void AnalysisWorker::schedule_background() {
  if (background_timer_.isActive() || !runner_.idle() || state_->background_left.load() == 0)
    return;
  const auto wake = posted_at_ + std::chrono::milliseconds(400);
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now());
  background_timer_.start(int(std::max<int64_t>(0, wait.count())));
}

void AnalysisWorker::submit_background() {
  if (!runner_.idle() || state_->background_left.load() == 0) return;
  runner_.submit_work(
      "background",
      [this, st = state_](JobContext& ctx) -> std::function<void()> {
        const auto t0 = Clock::now();
        Refinement r;
        try {
          r = background_step(*st, ctx);
        } catch (...) {
          st->background_left = st->background_count();
          throw;
        }
        st->background_left = st->background_count();
        trace("background step", t0);
        return [this, r = std::move(r)] {
          if (r.analysis && handlers_.analysis) handlers_.analysis(r.analysis, -1);
          if (r.sweep_finished && handlers_.sweep) handlers_.sweep(r.generation, r.sweep);
        };
      },
      hooks());
}

void AnalysisWorker::interrupt() {
  runner_.interrupt();
}

bool AnalysisWorker::idle() const {
  return runner_.idle() && state_->background_left.load() == 0;
}

}  // namespace attn::gui
