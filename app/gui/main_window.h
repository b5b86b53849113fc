// The attnscope main window: docks (Input, Model, Variants, Interventions, Attribution, Q/K map)
// around the Vulkan view, menus with standard shortcuts, persisted layout, themes, and the live
// loop: every edit is debounced, sent to the analysis jobs (app/gui/analysis_worker.h; stale work
// cancelled), and the results flow back into the canvas.
#pragma once
#include <QMainWindow>
#include <QTimer>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/views.h"
#include "app/core/export/figure_data.h"
#include "app/core/session/session.h"
#include "app/gui/job_runner.h"
#include "render/document.h"
#include "render/view_settings.h"

class QAction;
class QLabel;
class QMenu;
class QProgressBar;

namespace attn::gui {

class DecodeDialog;

class AnalysisWorker;
class AttributionDock;
class QkDock;
class InputDock;
class InterventionsDock;
class LessonPlayer;
class ModelDock;
class VariantsDock;
class VulkanView;

struct GuiOptions {
  std::string model = "default-text";
  std::string text;  // initial text (else text_file, else the bundled sample)
  std::string text_file;
  std::string image;    // initial image (vision models)
  std::string tensors;  // raw q/k/v folder
  std::string session;  // a .attnscope.json session to open (overrides the above)
  std::string lesson;   // a .attnscope-lesson.json lesson to play (after the session)
  // Initial variant specs (at most 4): a static/dynamic comparison sized for the default model.
  std::vector<std::string> variants = {"window(size=32)", "sinks_window(sinks=4,window=32)",
                                       "block_topk(block=16,k=4)", "top_p(block=16,p=0.9)"};
  int synthetic_tokens = 4096;
  int layer = 0, head = 0;   // initial selection
  bool use_settings = true;  // read and write QSettings (tests turn this off)
  // Where unsaved work is autosaved (at most 3 s after an edit; removed on a clean close).
  // Empty: <app data>/autosave.attnscope.json when use_settings, else no autosave. An autosave
  // left by a crash is offered for recovery at start (recover_without_asking: no dialog).
  std::string autosave_path;
  bool recover_without_asking = false;
  int width = 1600, height = 1000;
};

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const GuiOptions& options);
  ~MainWindow() override;

  VulkanView* view() const { return view_; }
  InputDock* input_dock() const { return input_; }
  ModelDock* model_dock() const { return model_; }
  VariantsDock* variants_dock() const { return variants_; }
  InterventionsDock* interventions_dock() const { return interventions_; }
  AttributionDock* attribution_dock() const { return attribution_; }
  QkDock* qk_dock() const { return qk_; }
  LessonPlayer* lesson_player() const { return lessons_; }
  // The core's analysis the view shows (its session is the one shown).
  std::shared_ptr<const core::Analysis> analysis() const { return analysis_; }
  // The session the docks edit: the source of truth of everything shown.
  const core::Session& session() const { return session_; }
  // Tile sets received for the current analysis (tests wait on it).
  int tiles_received() const { return tiles_received_; }
  // Whether the last tiles came from the Vulkan tile query on the view's own device.
  bool tiles_on_gpu() const { return tiles_gpu_; }
  // No analysis or tiles pending, and the shown tiles match what the view wants.
  bool settled() const;
  QString last_error() const { return last_error_; }
  // The worker has nothing running or queued (the trade-off sweep included).
  bool worker_idle() const;

  // Loads. Each is checked completely before it changes anything (app/core/session/
  // session_check.h); a refused one says why, naming the file and the field, and leaves the
  // window exactly as it was.
  void open_text_file(const QString& path);
  void open_image(const QString& path);
  void open_model_folder(const QString& dir);
  // A tensors folder (q.npy, k.npy, v.npy) instead of a model.
  void open_tensors(const QString& dir);
  // Sessions (app/core): the input, model, variants, selection and view settings. Returns
  // whether the file was opened (load_session()).
  bool open_session(const QString& path);
  // How a session reaches the window through load_session().
  struct SessionLoad {
    QString source;                // names it in messages: a file, "intro.lesson.json, step 3"
    QString session_path;          // locates its relative paths ("" = none)
    bool becomes_document = true;  // Ctrl+S then saves to session_path; the title names it
    bool ask_unsaved = true;       // unsaved changes are asked about first
    bool show_errors = true;       // a refusal is shown in a message box (else only returned)
  };
  // The one way a session is opened (File > Open session, drag and drop, --session, recovery,
  // a lesson's step): checked completely first (core::check_session_opens: variants, backends,
  // model, image or tensors, selection, ablation), then, unless the unsaved changes question is
  // cancelled, applied all at once. Returns "" when applied, else why not ("cancelled" when the
  // question was); a refusal changes nothing.
  QString load_session(const core::Session& s, const SessionLoad& how);
  // Writes the session to `path`, which Ctrl+S then saves to. Returns whether it was written.
  bool save_session_as(const QString& path);
  // Changes since the session was opened or saved (the title shows "*"); quitting and opening
  // another session or model ask Save / Discard / Cancel first (app/gui/dialogs.h).
  bool modified() const { return modified_; }
  // Asks about unsaved changes before `what`; false when the user cancelled or a save failed.
  bool maybe_save(const QString& what);
  // Closes without the question (SIGTERM, SIGINT): unsaved changes stay in the autosave.
  void close_without_asking();
  // Opens `s` as open_session() opens a file's (the docks and views follow); `base_path` locates
  // its relative paths. The title and the path Ctrl+S writes to are the caller's (lessons).
  void show_session_data(const core::Session& s, const std::string& base_path);
  // The tokens and cells (query, key) a lesson step points at, drawn by the views
  // (render::DisplaySettings); every session opened clears them.
  void set_highlight(std::vector<int> tokens, std::vector<std::pair<int, int>> cells);
  // The docks read into the session, with its paths made absolute (what a save would write).
  core::Session current_session();
  // Tools > Decode lab: streams the session's text under KV-cache policies (a new dialog).
  DecodeDialog* open_decode_lab();
  // The shown view as a publication figure (PNG, SVG or PDF by extension, through the same
  // presets as `attnscope render`) with its session sidecar. Returns "" or the error.
  QString export_figure(const QString& path);
  // Writes the autosave file now (no file hashes: quick); the path written, or "" when off.
  QString autosave_now();
  void set_view(render::ViewKind v);
  // The Attribution view's export: the last run as the "attribution" figure preset (the one
  // `attnscope attribute --figure` writes) with its session sidecar. Returns "" or the error.
  QString export_attribution(const QString& path, const core::Session& s);
  // The Q/K map view's export: the last map as the "qk" figure preset (the one `attnscope qk
  // --figure` writes) with its session sidecar. Returns "" or the error.
  QString export_qk(const QString& path, const core::Session& s);
  // The Step-through view's export: the steps it shows as the "steps" figure preset (the one
  // `attnscope explain-head --figure` writes) with its session sidecar. Returns "" or the error.
  QString export_steps(const QString& path, const core::Session& s);
  // Figure data made by `make` (a view the analysis does not hold) written with its sidecar.
  QString export_data(const QString& path, const core::Session& s,
                      const std::function<core::FigureData()>& make);
  void show_exported(const QString& path, const core::FigureSize& size);
  // Where "Open image..." starts: the current image's folder, else the bundled images.
  QString image_dialog_dir() const;
  void set_dark(bool dark);
  void set_presentation(bool on);
  // Sends the current inputs to the worker now (skipping the debounce).
  void submit_now();

 protected:
  void closeEvent(QCloseEvent* e) override;
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dropEvent(QDropEvent* e) override;

 private:
  // The constructor's parts, in order: the view and docks, the status bar, the worker's
  // handlers, the view's tile requests, the docks' edits, the menus, the options and saved
  // settings into the docks, the autosave.
  void build_docks();
  void build_status_bar();
  void connect_worker();
  void connect_view();
  void connect_docks();
  void build_menus();
  // Stops compute on the view's Vulkan device before Qt destroys it (on close and destruction).
  void release_view_device();
  void load_initial_state();
  void start_autosave();
  // An analysis failed: the view is cleared and says why.
  void on_error(const QString& msg);
  // Reads the docks into session_ (the one place widgets map to the session) and back.
  void sync_session();
  void show_session();
  // The session's view settings into the canvas (deferred until the canvas exists).
  void apply_view_settings();
  void offer_recovery();
  // An edit: the session differs from its file (the title shows it).
  void mark_modified();
  void update_title();
  // File > Save session as...: asks for a file and saves there.
  void save_as_dialog();
  // No text to analyse: no tokens, views, scan or attribution of an earlier text stay on show.
  void show_empty_input();
  void schedule_analysis(int delay_ms = 200);
  // Arms the autosave of an edit (no-op while armed or when autosave is off).
  void start_autosave_timer();
  void on_analysis(std::shared_ptr<const core::Analysis> a, double seconds);
  void publish_document();
  // The last attribution run into `doc`, with a note when it no longer matches what is shown.
  void add_attribution(render::Document& doc) const;
  // The last Q/K map into `doc`, with a note when it no longer matches what is shown.
  void add_qk(render::Document& doc) const;
  // The step-through of the analysis's selected head, on steps_runner_; publishes when in.
  void request_steps();
  void on_tiles(uint64_t generation, std::vector<render::PanelTile> tiles, double seconds);
  void on_frame();
  void update_status();
  void add_recent(const QString& path);
  void rebuild_recent();
  void save_png();
  void about();

  GuiOptions options_;
  VulkanView* view_ = nullptr;
  InputDock* input_ = nullptr;
  ModelDock* model_ = nullptr;
  VariantsDock* variants_ = nullptr;
  InterventionsDock* interventions_ = nullptr;
  AttributionDock* attribution_ = nullptr;
  QkDock* qk_ = nullptr;
  LessonPlayer* lessons_ = nullptr;
  std::vector<int> highlight_tokens_;  // set_highlight()
  std::vector<std::pair<int, int>> highlight_cells_;
  std::unique_ptr<AnalysisWorker> worker_;
  core::Session session_;
  std::string session_path_;  // locates the session's relative paths ("" = unsaved)
  QString saved_path_;        // where Ctrl+S writes: the session opened or last saved ("" = none)
  bool modified_ = false;     // edited since opened or saved
  bool close_unasked_ = false;
  std::shared_ptr<const core::Analysis> analysis_;
  std::vector<core::TradeoffPoint> sweep_;  // automatic sweep of analysis_'s generation
  uint64_t sweep_gen_ = 0;
  std::shared_ptr<const render::Document> doc_;
  std::string pending_grid_metric_;  // a session's grid metric, applied once the grid exists
  bool view_from_session_ = false;   // session_'s view settings still to reach the canvas
  QTimer analysis_timer_, tile_timer_, autosave_timer_;
  QString autosave_path_;
  bool analysis_pending_ = false;
  bool tiles_pending_ = false;
  uint64_t requested_serial_ = 0, requested_gen_ = 0, shown_serial_ = 0, shown_gen_ = 0;
  int tiles_received_ = 0;
  bool tiles_gpu_ = false;
  double analysis_s_ = 0, tiles_s_ = 0;
  QString stage_, last_error_;
  QLabel* stage_label_ = nullptr;
  QLabel* timing_label_ = nullptr;
  QProgressBar* busy_ = nullptr;
  QMenu* recent_menu_ = nullptr;
  bool dark_ = true, presentation_ = false;
  QAction* presentation_action_ = nullptr;
  QByteArray before_presentation_;  // window layout before presentation mode
  bool resubmit_on_show_ = false;   // closed with work cancelled: ask again when shown
  // A session opened on the Attribution view with methods set: run them once its analysis is in.
  bool attribution_on_open_ = false;
  // A session opened on the Q/K map view: compute its PCA map once its analysis is in.
  bool qk_on_open_ = false;
  // The step-through view's document for the current analysis (null until the first arrives),
  // computed in the background; declared last, so it stops before anything it could touch.
  std::shared_ptr<const render::StepsDoc> steps_;
  std::shared_ptr<const core::HeadSteps> head_steps_;    // what steps_ was filled from, or null
  std::shared_ptr<const core::Analysis> head_steps_on_;  // the analysis they were computed on
  JobRunner steps_runner_{true};
};

}  // namespace attn::gui
