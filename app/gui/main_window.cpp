#include "app/gui/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QCoreApplication>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QStyleFactory>
#include <cstdio>
#include <filesystem>

#include "app/core/analysis/attribution_doc.h"
#include "app/core/analysis/interactive.h"
#include "app/core/analysis/qk_doc.h"
#include "app/core/attribution/attribution_export.h"
#include "app/core/export/figure_data.h"
#include "app/core/session/model_catalog.h"
#include "app/core/session/session_check.h"
#include "app/core/teaching/steps_doc.h"
#include "app/figures/figure.h"
#include "app/gui/analysis_worker.h"
#include "app/gui/attribution_dock.h"
#include "app/gui/decode_dialog.h"
#include "app/gui/dialogs.h"
#include "app/gui/input_dock.h"
#include "app/gui/interventions_dock.h"
#include "app/gui/lesson_player.h"
#include "app/gui/model_dock.h"
#include "app/gui/qk_dock.h"
#include "app/gui/shared_device.h"
#include "app/gui/variant_slot.h"
#include "app/gui/variants_dock.h"
#include "app/gui/vulkan_view.h"
#include "app/gui/wheel_guard.h"
#include "compute/error.h"
#include "render/canvas.h"

namespace attn::gui {
namespace {

QString bundled_dir(const QString& what);

QString bundled_sample() {
  QFile f(bundled_dir("samples") + "/lighthouse.txt");
  if (f.open(QIODevice::ReadOnly)) return QString::fromUtf8(f.readAll());
  return "The keeper of the lighthouse wrote every evening in a small book.";
}

// Session names of the views, in render::ViewKind order: the heatmap view shows every variant
// beside dense, which is the `variants` figure ("heatmap", one head of dense, opens there too).
const char* kSessionViews[] = {"variants", "grid",        "sinks", "tokens", "image",
                               "tradeoff", "attribution", "qk",    "steps"};
// Session names of the trade-off view's y axes, in render::DisplaySettings::tradeoff_y order.
const char* kTradeoffY[] = {"rel_error", "mass_recall", "next_token_kl"};

// A folder of the bundled assets ("images", "samples"): the source tree's, else the installed
// share/attnscope one next to the executable; "" when neither exists.
QString bundled_dir(const QString& what) {
  QStringList dirs;
#ifdef ATTNSCOPE_SOURCE_DIR
  // ATTNSCOPE_NO_SOURCE_TREE=1 ignores the source tree's copy (tests of an installed package).
  const QString no_tree = qEnvironmentVariable("ATTNSCOPE_NO_SOURCE_TREE");
  if (no_tree.isEmpty() || no_tree == "0")
    dirs << QString(ATTNSCOPE_SOURCE_DIR) + "/assets/" + what;
#endif
  dirs << QCoreApplication::applicationDirPath() + "/../share/attnscope/" + what;
  for (const QString& d : dirs)
    if (QFileInfo(d).isDir()) return QFileInfo(d).canonicalFilePath();
  return {};
}

// The sample image a vision model opens with when no image was chosen.
QString bundled_image() {
  const QString d = bundled_dir("images");
  if (d.isEmpty()) return {};
  if (QFileInfo::exists(d + "/sneaker_1.png")) return d + "/sneaker_1.png";
  const QStringList pngs = QDir(d).entryList({"*.png"}, QDir::Files, QDir::Name);
  return pngs.isEmpty() ? QString() : d + "/" + pngs.front();
}

bool is_image_file(const QString& path) {
  const QString s = QFileInfo(path).suffix().toLower();
  return s == "png" || s == "jpg" || s == "jpeg" || s == "bmp" || s == "gif" || s == "pgm" ||
         s == "ppm" || s == "tga";
}

}  // namespace

MainWindow::MainWindow(const GuiOptions& options) : options_(options) {
  install_wheel_guard();  // before the docks' widgets are polished
  build_docks();
  build_status_bar();
  connect_worker();
  connect_view();
  connect_docks();
  build_menus();
  load_initial_state();
  modified_ = false;  // what the window starts with is no edit
  update_title();
  if (!options_.session.empty()) open_session(QString::fromStdString(options_.session));
  if (!options_.lesson.empty()) lessons_->open(QString::fromStdString(options_.lesson));
  start_autosave();
  submit_now();
}

void MainWindow::build_docks() {
  setWindowTitle("attnscope[*]");
  setAcceptDrops(true);
  setDockOptions(AnimatedDocks | AllowTabbedDocks);
  view_ = new VulkanView;
  QWidget* container = QWidget::createWindowContainer(view_);
  container->setMinimumSize(480, 320);
  container->setFocusPolicy(Qt::StrongFocus);
  setCentralWidget(container);

  input_ = new InputDock(this);
  model_ = new ModelDock(this);
  variants_ = new VariantsDock(this);
  interventions_ = new InterventionsDock(this);
  attribution_ = new AttributionDock(this);
  qk_ = new QkDock(this);
  addDockWidget(Qt::LeftDockWidgetArea, model_);
  addDockWidget(Qt::LeftDockWidgetArea, input_);
  addDockWidget(Qt::RightDockWidgetArea, variants_);
  addDockWidget(Qt::RightDockWidgetArea, interventions_);
  addDockWidget(Qt::RightDockWidgetArea, attribution_);
  addDockWidget(Qt::RightDockWidgetArea, qk_);
  tabifyDockWidget(variants_, interventions_);  // tabs beside Variants, which stays in front
  tabifyDockWidget(interventions_, attribution_);
  tabifyDockWidget(attribution_, qk_);
  variants_->raise();
  resizeDocks({model_, variants_}, {300, 300}, Qt::Horizontal);
  resizeDocks({model_, input_}, {260, 640}, Qt::Vertical);
  variants_->setMinimumWidth(270);
  model_->setMinimumWidth(260);
}

void MainWindow::build_status_bar() {
  stage_label_ = new QLabel;
  busy_ = new QProgressBar;
  busy_->setMaximumWidth(120);
  busy_->setRange(0, 0);
  busy_->hide();
  timing_label_ = new QLabel;
  statusBar()->addWidget(stage_label_, 1);
  statusBar()->addPermanentWidget(busy_);
  statusBar()->addPermanentWidget(timing_label_);
}

void MainWindow::connect_worker() {
  AnalysisWorker::Handlers h;  // called on the GUI thread
  h.analysis = [this](std::shared_ptr<const core::Analysis> a, double s) { on_analysis(a, s); };
  h.tiles = [this](uint64_t g, std::vector<render::PanelTile> t, double s) {
    on_tiles(g, std::move(t), s);
  };
  h.sweep = [this](uint64_t g, std::vector<core::TradeoffPoint> pts) {
    sweep_ = std::move(pts);
    sweep_gen_ = g;
    if (analysis_ && analysis_->generation == g) publish_document();
  };
  h.error = [this](const std::string& m) { on_error(QString::fromStdString(m)); };
  h.progress = [this](const std::string& s) {
    stage_ = QString::fromStdString(s);
    update_status();
  };
  worker_ = std::make_unique<AnalysisWorker>(std::move(h));
}

void MainWindow::on_error(const QString& msg) {
  last_error_ = msg;
  analysis_pending_ = tiles_pending_ = false;
  // What is shown no longer matches the inputs: clear it, say why in the view too.
  analysis_.reset();
  auto empty = std::make_shared<render::Document>();
  empty->title = msg.toStdString();
  add_attribution(*empty);
  add_qk(*empty);
  doc_ = empty;
  if (view_->canvas()) view_->canvas()->set_document(doc_);
  view_->redraw();
  model_->show_info(std::nullopt, "\u2014", 64, 64);
  stage_label_->setText("<span style='color:#e05050'>" + msg.toHtmlEscaped() + "</span>");
  busy_->hide();
}

void MainWindow::connect_view() {
  analysis_timer_.setSingleShot(true);
  tile_timer_.setSingleShot(true);
  connect(&analysis_timer_, &QTimer::timeout, this, &MainWindow::submit_now);
  connect(&tile_timer_, &QTimer::timeout, this, [this] {
    render::Canvas* c = view_->canvas();
    if (!c || !analysis_) return;
    const render::TileWant w = c->wanted_tiles();
    if (w.w <= 0 || w.h <= 0) return;
    TileJob j{analysis_->generation, w.q0, w.q1, w.k0, w.k1, w.w, w.h};
    requested_serial_ = w.serial;
    requested_gen_ = analysis_->generation;
    tiles_pending_ = true;
    worker_->request_tiles(j);
  });
  view_->on_canvas_ready = [this] {
    render::Canvas* c = view_->canvas();
    c->settings().dark = dark_;
    c->settings().presentation = presentation_;
    c->settings().highlight_tokens = highlight_tokens_;
    c->settings().highlight_cells = highlight_cells_;
    render::Callbacks cb;
    cb.hover = [this](int p, int q, int k) {
      return analysis_ ? core::hover(*analysis_, p, q, k) : render::HoverInfo{};
    };
    cb.row = [this](int p, int q) {
      return analysis_ ? core::probability_row(*analysis_, p, q) : std::vector<float>{};
    };
    cb.select_head = [this](int l, int hd) {
      model_->set_selection(l, hd);
      set_view(render::ViewKind::Heatmaps);
    };
    c->set_callbacks(cb);
    apply_view_settings();  // a session opened before the window was shown
    if (doc_) c->set_document(doc_);
    if (resubmit_on_show_) {
      resubmit_on_show_ = false;
      submit_now();
    }
  };
  view_->on_frame = [this] { on_frame(); };
}

void MainWindow::connect_docks() {
  connect(input_, &InputDock::text_changed, this, [this] {
    if (session_.input.kind != "image") schedule_analysis(250);
  });
  connect(input_, &InputDock::open_text_requested, this, [this] {
    const QString f =
        QFileDialog::getOpenFileName(this, "Open text", {}, "Text (*.txt *.md);;All files (*)");
    if (!f.isEmpty()) open_text_file(f);
  });
  connect(input_, &InputDock::open_image_requested, this, [this] {
    const QString f =
        QFileDialog::getOpenFileName(this, "Open image", image_dialog_dir(),
                                     "Images (*.png *.jpg *.jpeg *.bmp *.gif *.pgm *.ppm)");
    if (!f.isEmpty()) open_image(f);
  });
  connect(model_, &ModelDock::model_changed, this, [this] {
    // The embedded vision model opens on a bundled image rather than failing on the text.
    if (model_->model() == "default-vision" && session_.input.image.empty()) {
      const QString img = bundled_image();
      if (!img.isEmpty()) {
        session_.input.image = img.toStdString();
        input_->set_image(img);
      }
    }
    schedule_analysis(50);
  });
  connect(model_, &ModelDock::selection_changed, this, [this] { schedule_analysis(0); });
  connect(model_, &ModelDock::open_folder_requested, this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, "Open model folder");
    if (!d.isEmpty()) open_model_folder(d);
  });
  connect(model_, &ModelDock::open_tensors_requested, this, [this] {
    const QString d =
        QFileDialog::getExistingDirectory(this, "Open tensors folder (q.npy, k.npy, v.npy)");
    if (!d.isEmpty()) open_tensors(d);
  });
  connect(variants_, &VariantsDock::changed, this, [this] { schedule_analysis(150); });
  connect(interventions_, &InterventionsDock::changed, this, [this] { schedule_analysis(150); });
  connect(interventions_, &InterventionsDock::patch_edited, this, [this] {
    mark_modified();
    start_autosave_timer();
  });
  connect(attribution_, &AttributionDock::edited, this, [this] {
    mark_modified();
    start_autosave_timer();
  });
  // A finished run becomes the Attribution view's document, and the view is shown.
  connect(attribution_, &AttributionDock::finished, this, [this] {
    if (analysis_) {
      publish_document();
    } else if (doc_) {
      auto d = std::make_shared<render::Document>(*doc_);
      add_attribution(*d);
      doc_ = d;
      if (view_->canvas()) view_->canvas()->set_document(doc_);
    }
    set_view(render::ViewKind::Attribution);
  });
  connect(qk_, &QkDock::edited, this, [this] {
    mark_modified();
    start_autosave_timer();
  });
  // A map becomes the Q/K view's document; one asked for with Compute shows the view.
  connect(qk_, &QkDock::finished, this, [this](bool requested) {
    if (analysis_) {
      publish_document();
    } else if (doc_) {
      auto d = std::make_shared<render::Document>(*doc_);
      add_qk(*d);
      doc_ = d;
      if (view_->canvas()) view_->canvas()->set_document(doc_);
    }
    if (requested) set_view(render::ViewKind::Qk);
    view_->redraw();
  });
}

void MainWindow::load_initial_state() {
  // Initial state: settings first, then the command line wins.
  if (options_.use_settings) {
    QSettings s;
    if (!restoreGeometry(s.value("window/geometry").toByteArray()))
      resize(options_.width, options_.height);
    restoreState(s.value("window/state").toByteArray());
    dark_ = s.value("view/dark", true).toBool();
  } else {
    resize(options_.width, options_.height);
  }
  set_dark(dark_);
  model_->blockSignals(true);
  variants_->blockSignals(true);
  input_->blockSignals(true);
  model_->set_synthetic_tokens(options_.synthetic_tokens);
  model_->show_info(std::nullopt, "Loading...", 64, 64);  // bounds until the model is known
  model_->set_selection(options_.layer, options_.head);
  if (!options_.tensors.empty())
    model_->set_tensors(QString::fromStdString(options_.tensors));
  else
    model_->set_model(QString::fromStdString(options_.model));
  try {
    variants_->set_specs(options_.variants);
  } catch (const Error& e) {
    last_error_ = e.what();
    stage_label_->setText(last_error_);
  }
  if (!options_.text.empty())
    input_->set_text(QString::fromStdString(options_.text));
  else if (!options_.text_file.empty()) {
    QFile f(QString::fromStdString(options_.text_file));
    if (f.open(QIODevice::ReadOnly))
      input_->set_text(QString::fromUtf8(f.readAll()));
    else
      last_error_ = "cannot open " + QString::fromStdString(options_.text_file);
  } else {
    input_->set_text(bundled_sample());
  }
  input_->set_image(QString::fromStdString(options_.image));
  session_.input.image = options_.image;
  if (!options_.image.empty() && options_.model != "default-text" &&
      options_.model != "teaching-text")
    session_.input.kind = "image";
  model_->blockSignals(false);
  variants_->blockSignals(false);
  input_->blockSignals(false);
}

void MainWindow::start_autosave() {
  // Autosave: at most 3 s after an edit (start_autosave_timer).
  autosave_path_ = QString::fromStdString(options_.autosave_path);
  if (autosave_path_.isEmpty() && options_.use_settings) {
    // One attnscope folder under the XDG data directory ($XDG_DATA_HOME/attnscope).
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation);
    if (!dir.isEmpty()) autosave_path_ = dir + "/attnscope/autosave.attnscope.json";
  }
  autosave_timer_.setSingleShot(true);
  connect(&autosave_timer_, &QTimer::timeout, this, [this] { autosave_now(); });
  // Asked once the main window is on screen, so the question has the window behind it.
  if (!autosave_path_.isEmpty() && options_.session.empty() && QFileInfo::exists(autosave_path_)) {
    if (options_.recover_without_asking)
      offer_recovery();
    else
      QTimer::singleShot(0, this, [this] { offer_recovery(); });
  }
}

void MainWindow::offer_recovery() {
  const bool yes =
      options_.recover_without_asking ||
      QMessageBox::question(this, "Recover unsaved work",
                            "attnscope did not close cleanly last time. Restore the text, model, "
                            "variants and view it was showing?\n\n" +
                                autosave_path_) == QMessageBox::Yes;
  if (!yes) return;
  // The recovered work is unsaved: Ctrl+S asks where to save it, quitting asks about it.
  SessionLoad how;
  how.source = how.session_path = autosave_path_;
  how.becomes_document = false;
  how.ask_unsaved = false;
  try {
    if (load_session(core::load_session(autosave_path_.toStdString()), how).isEmpty())
      mark_modified();
  } catch (const Error& e) {
    show_error(this, "Recover unsaved work", QString::fromUtf8(e.what()));
  }
}

QString MainWindow::autosave_now() {
  if (autosave_path_.isEmpty()) return {};
  try {
    std::filesystem::create_directories(
        std::filesystem::path(autosave_path_.toStdString()).parent_path());
    core::save_session(current_session(), autosave_path_.toStdString());
    return autosave_path_;
  } catch (const std::exception& e) {
    stage_label_->setText(QString("autosave failed: ") + e.what());
    return {};
  }
}

MainWindow::~MainWindow() {
  // The view (a child widget) destroys its device after this: no job may still be computing on
  // it, and the job runner leaves a slow job to finish alone rather than wait for it.
  release_view_device();
  worker_.reset();
}

void MainWindow::release_view_device() {
  // Jobs started from now on find no shared device (they compute on the CPU, or on the view's
  // new device once the window is shown again); the one running stops at its next check.
  stop_sharing(view_->compute_context());
  worker_->interrupt();
}

void MainWindow::build_menus() {
  lessons_ = new LessonPlayer(this);
  addDockWidget(Qt::BottomDockWidgetArea, lessons_);
  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("&Open text...", QKeySequence::Open, this, [this] {
    const QString f =
        QFileDialog::getOpenFileName(this, "Open text", {}, "Text (*.txt *.md);;All files (*)");
    if (!f.isEmpty()) open_text_file(f);
  });
  file->addAction("Open &image...", QKeySequence(Qt::CTRL | Qt::Key_I), this, [this] {
    const QString f =
        QFileDialog::getOpenFileName(this, "Open image", image_dialog_dir(),
                                     "Images (*.png *.jpg *.jpeg *.bmp *.gif *.pgm *.ppm)");
    if (!f.isEmpty()) open_image(f);
  });
  file->addAction("Open &model folder...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O), this,
                  [this] {
                    const QString d = QFileDialog::getExistingDirectory(this, "Open model folder");
                    if (!d.isEmpty()) open_model_folder(d);
                  });
  file->addAction("Open &tensors...", this, [this] {
    const QString d =
        QFileDialog::getExistingDirectory(this, "Open tensors folder (q.npy, k.npy, v.npy)");
    if (!d.isEmpty()) open_tensors(d);
  });
  file->addSeparator();
  file->addAction("Open &session...", QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_O), this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, "Open session", {},
                                                   "Sessions (*.attnscope.json);;JSON (*.json)");
    if (!f.isEmpty()) open_session(f);
  });
  auto save_as = [this] { save_as_dialog(); };
  // Ctrl+S saves the session, as desktop users expect: to the file it came from or was last
  // saved to, else through Save As.
  file->addAction("&Save session", QKeySequence::Save, this, [this, save_as] {
    if (saved_path_.isEmpty())
      save_as();
    else
      save_session_as(saved_path_);
  });
  file->addAction("Save session &as...", QKeySequence::SaveAs, this, save_as);
  file->addSeparator();
  lessons_->add_file_actions(file);
  recent_menu_ = file->addMenu("&Recent files");
  rebuild_recent();
  file->addSeparator();
  file->addAction("&Export figure...", QKeySequence(Qt::CTRL | Qt::Key_E), this, [this] {
    QString filter;
    const QString f = QFileDialog::getSaveFileName(
        this, "Export figure", "attnscope.pdf", "PDF (*.pdf);;SVG (*.svg);;PNG (*.png)", &filter);
    if (f.isEmpty()) return;
    const QString err = export_figure(f);
    if (!err.isEmpty()) QMessageBox::warning(this, "Export figure", err);
  });
  file->addAction("Save view as &PNG...", this, &MainWindow::save_png);
  file->addSeparator();
  file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);

  QMenu* view = menuBar()->addMenu("&View");
  auto* group = new QActionGroup(this);
  for (int v = 0; v < render::kViewCount; ++v) {
    QAction* a = view->addAction(render::view_name(render::ViewKind(v)),
                                 QKeySequence(Qt::CTRL | (Qt::Key_1 + v)), this,
                                 [this, v] { set_view(render::ViewKind(v)); });
    a->setCheckable(true);
    a->setChecked(v == 0);
    group->addAction(a);
  }
  view->addSeparator();
  view->addAction("Reset &zoom", QKeySequence(Qt::CTRL | Qt::Key_0), this, [this] {
    if (view_->canvas()) view_->canvas()->reset_view();
    view_->redraw();
  });
  QAction* dark = view->addAction("&Dark theme", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D),
                                  this, [this](bool on) { set_dark(on); });
  dark->setCheckable(true);
  dark->setChecked(dark_);
  presentation_action_ = view->addAction("&Presentation mode", QKeySequence(Qt::Key_F5), this,
                                         [this](bool on) { set_presentation(on); });
  presentation_action_->setCheckable(true);
  view->addAction("&Full screen", QKeySequence::FullScreen, this,
                  [this] { isFullScreen() ? showNormal() : showFullScreen(); });
  view->addSeparator();
  view->addAction(input_->toggleViewAction());
  view->addAction(model_->toggleViewAction());
  view->addAction(variants_->toggleViewAction());
  view->addAction(interventions_->toggleViewAction());
  view->addAction(attribution_->toggleViewAction());
  view->addAction(qk_->toggleViewAction());
  view->addAction(lessons_->toggleViewAction());

  QMenu* tools = menuBar()->addMenu("&Tools");
  tools->addAction("&Decode lab...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_L), this,
                   [this] { open_decode_lab(); });

  QMenu* help = menuBar()->addMenu("&Help");
  lessons_->add_help_actions(help);
  help->addAction("&About attnscope", this, &MainWindow::about);
  help->addAction("About &Qt", qApp, &QApplication::aboutQt);
}

void MainWindow::save_as_dialog() {
  QString f = QFileDialog::getSaveFileName(
      this, "Save session", saved_path_.isEmpty() ? "attnscope.attnscope.json" : saved_path_,
      "Sessions (*.attnscope.json)");
  if (f.isEmpty()) return;
  if (!f.endsWith(".json")) f += core::kSessionSuffix;
  save_session_as(f);
}

void MainWindow::schedule_analysis(int delay_ms) {
  mark_modified();
  analysis_timer_.start(delay_ms);
  start_autosave_timer();
}

void MainWindow::start_autosave_timer() {
  // Started by the first edit after an autosave, never pushed back by later ones: the autosave
  // is at most 3 s behind however steadily the user types.
  if (!autosave_path_.isEmpty() && !autosave_timer_.isActive()) autosave_timer_.start(3000);
}

void MainWindow::submit_now() {
  analysis_timer_.stop();
  start_autosave_timer();
  sync_session();
  if (session_.input.kind == "text" && session_.input.text.empty()) return show_empty_input();
  analysis_pending_ = true;
  last_error_.clear();
  worker_->request_analysis(session_, session_path_);
  update_status();
}

void MainWindow::sync_session() {
  core::Session& s = session_;
  const std::string model = model_->model();
  if (model == "synthetic") {
    s.input.kind = "synthetic";
    s.input.synthetic_tokens = model_->synthetic_tokens();
  } else if (model == "tensors") {
    s.input.kind = "tensors";
    s.input.tensors = model_->tensors();
  } else {
    s.model.id = model;
    if (model == "default-vision" && !s.input.image.empty())
      s.input.kind = "image";
    else if (model == "default-text" || model == "teaching-text" || s.input.kind != "image")
      s.input.kind = "text";
  }
  s.input.text = input_->text();
  s.variants = variants_->specs();
  s.variant_backends = variants_->backends();
  // An ablation needs a model; switching to tensors or a synthetic problem leaves it aside.
  const bool model_free = s.input.kind == "tensors" || s.input.kind == "synthetic";
  s.ablation = model_free ? core::SessionAblation{} : interventions_->ablation();
  s.patch = interventions_->patch_setup();
  s.attribution = attribution_->setup();
  s.view.qk_method = qk_->method();
  s.view.show_dense = variants_->show_dense() || s.variants.empty();
  s.backend = model_->backend();
  s.layer = model_->layer();
  s.head = model_->head();
  if (render::Canvas* c = view_->canvas()) {
    s.view.view = kSessionViews[int(c->settings().view)];
    s.view.log_scale = c->settings().log_scale;
    s.view.colormap = render::colormap_name(c->settings().colormap);
    // The head grid's metric by name (the figures draw the same one), the trade-off axes too.
    const render::DisplaySettings& d = c->settings();
    if (doc_ && d.grid_metric >= 0 && d.grid_metric < int(doc_->grid.names.size()))
      s.view.grid_metric = doc_->grid.names[size_t(d.grid_metric)];
    if (doc_ && d.grid_variant >= 0 && d.grid_variant < int(doc_->grid.variants.size()))
      s.view.grid_variant = doc_->grid.variants[size_t(d.grid_variant)];
    s.view.grid_scale = d.grid_unit_scale ? "unit" : "data";
    // A query row past the input (the text got shorter) is reset to the last token.
    s.view.query = analysis_ && d.query >= analysis_->n_tokens() ? -1 : d.query;
    s.view.tradeoff_x = d.tradeoff_x == 1 ? "seconds" : "density";
    s.view.tradeoff_y = kTradeoffY[std::clamp(d.tradeoff_y, 0, 2)];
    s.extra["gui"] = {{"display_mode", int(d.mode)},
                      {"image_mode", d.image_mode},
                      {"outlines", d.outlines},
                      {"attribution_layout", d.attribution_layout}};
  }
}

void MainWindow::show_session() {
  const core::Session& s = session_;
  set_highlight({}, {});  // a lesson sets its step's again after opening it
  model_->blockSignals(true);
  variants_->blockSignals(true);
  input_->blockSignals(true);
  if (s.input.kind == "synthetic") {
    model_->set_synthetic_tokens(s.input.synthetic_tokens);
    model_->set_model("synthetic");
  } else if (s.input.kind == "tensors") {
    model_->set_tensors(
        QString::fromStdString(core::resolve_session_path(session_path_, s.input.tensors)));
  } else {
    model_->set_model(
        QString::fromStdString(core::is_default_model_name(s.model.id)
                                   ? s.model.id
                                   : core::resolve_session_path(session_path_, s.model.id)));
  }
  model_->set_backend(QString::fromStdString(s.backend));
  if (s.input.kind == "image")
    input_->set_image(
        QString::fromStdString(core::resolve_session_path(session_path_, s.input.image)));
  if (!s.input.text.empty()) input_->set_text(QString::fromStdString(s.input.text));
  variants_->set_specs(std::vector<std::string>(
      s.variants.begin(), s.variants.begin() + std::min<size_t>(4, s.variants.size())));
  for (size_t i = 0; i < s.variant_backends.size() && i < size_t(VariantsDock::kSlots); ++i)
    variants_->slot(int(i))->set_backend(s.variant_backends[i]);
  variants_->set_show_dense(s.view.show_dense);
  interventions_->blockSignals(true);
  interventions_->set_ablation(s.ablation);
  interventions_->set_patch_setup(s.patch);
  interventions_->blockSignals(false);
  attribution_->set_setup(s.attribution);
  qk_->set_method(s.view.qk_method);
  model_->show_info(std::nullopt, "Loading...", 64, 64);
  model_->set_selection(s.layer, s.head);
  model_->blockSignals(false);
  variants_->blockSignals(false);
  input_->blockSignals(false);
  view_from_session_ = true;
  apply_view_settings();
}

void MainWindow::apply_view_settings() {
  render::Canvas* c = view_->canvas();
  if (!view_from_session_ || !c) return;  // the canvas exists from the first exposure on
  view_from_session_ = false;
  const core::Session& s = session_;
  for (int v = 0; v < render::kViewCount; ++v)
    if (s.view.view == kSessionViews[v] || (v == 0 && s.view.view == "heatmap"))
      set_view(render::ViewKind(v));
  render::DisplaySettings& d = c->settings();
  d.log_scale = s.view.log_scale;
  try {
    d.colormap = render::colormap_from_name(s.view.colormap);
  } catch (const Error& e) {
    stage_label_->setText(e.what());  // an unknown map: keep the one shown
  }
  d.tradeoff_x = s.view.tradeoff_x == "seconds" ? 1 : 0;
  for (int y = 0; y < 3; ++y)
    if (s.view.tradeoff_y == kTradeoffY[y]) d.tradeoff_y = y;
  if (s.extra.contains("gui") && s.extra["gui"].is_object()) {
    // Kept verbatim from the file, so anything may be there: a value of the wrong type is
    // skipped (json::value() would throw out of the event handler that opened the session).
    const nlohmann::json& gui = s.extra["gui"];
    auto number = [&gui](const char* key, int def) {
      const auto it = gui.find(key);
      return it != gui.end() && it->is_number() ? int(std::clamp(it->get<double>(), 0.0, 2.0))
                                                : def;
    };
    d.mode = render::DisplayMode(number("display_mode", 0));
    d.image_mode = number("image_mode", d.image_mode);
    d.attribution_layout = number("attribution_layout", d.attribution_layout);
    const auto outlines = gui.find("outlines");
    if (outlines != gui.end() && outlines->is_boolean()) d.outlines = outlines->get<bool>();
  }
  d.grid_variant = -1;  // the session's grid variant, as the document carries it
  d.grid_unit_scale = s.view.grid_scale == "unit";
  d.query = s.view.query;
  pending_grid_metric_ = s.view.grid_metric;  // its index is known once the grid is
}

void MainWindow::publish_document() {
  auto d = std::make_shared<render::Document>(core::document(
      *analysis_,
      sweep_gen_ == analysis_->generation ? sweep_ : std::vector<core::TradeoffPoint>{}));
  add_attribution(*d);
  add_qk(*d);
  if (steps_) d->steps = *steps_;
  doc_ = d;
  if (!pending_grid_metric_.empty() && view_->canvas())
    for (size_t m = 0; m < doc_->grid.names.size(); ++m)
      if (doc_->grid.names[m] == pending_grid_metric_) {
        view_->canvas()->settings().grid_metric = int(m);
        pending_grid_metric_.clear();
      }
  if (view_->canvas()) view_->canvas()->set_document(doc_);
  view_->redraw();
}

void MainWindow::add_attribution(render::Document& doc) const {
  const auto run = attribution_->doc();
  if (!run) return;
  doc.attribution = *run;
  const auto ran_on = attribution_->ran_on();
  const std::string why = !analysis_ ? "the current input could not be analysed"
                          : ran_on   ? core::attribution_stale(*ran_on, *analysis_,
                                                               attribution_->ran_setup().with_variant)
                                     : "";
  if (!why.empty()) {
    std::string& note = doc.attribution.note;
    note = "Out of date: " + why + ". Press Run in the Attribution dock to update." +
           (note.empty() ? "" : " " + note);
  }
}

void MainWindow::add_qk(render::Document& doc) const {
  const auto map = qk_->doc();
  if (!map) return;
  doc.qk = *map;
  const auto ran_on = qk_->ran_on();
  const std::string why =
      !analysis_ ? "the current input could not be analysed"
      : ran_on   ? core::qk_stale(*ran_on, qk_->ran_layer(), qk_->ran_head(), *analysis_)
                 : "";
  if (!why.empty())
    doc.qk.note = "Out of date: " + why + ". Press Compute in the Q/K map dock to update.";
}

void MainWindow::request_steps() {
  const std::shared_ptr<const core::Analysis> a = analysis_;
  if (!a) return;
  const int layer = a->session.layer, head = a->session.head;
  steps_runner_.submit(
      "steps",
      [a, layer, head](JobContext&) { return core::steps_run_for_analysis(*a, layer, head); },
      [this, a](core::StepsRun run) {
        steps_ = std::make_shared<const render::StepsDoc>(std::move(run.doc));
        head_steps_ = std::move(run.steps);
        head_steps_on_ = a;
        if (analysis_) publish_document();
      });
}

void MainWindow::on_analysis(std::shared_ptr<const core::Analysis> a, double seconds) {
  QElapsedTimer trace;
  trace.start();
  const bool refinement = seconds < 0;
  // Left over from before the input was emptied.
  if (session_.input.kind == "text" && input_->text().empty()) return;
  if (render::Canvas* c = view_->canvas(); c && c->settings().query >= a->n_tokens())
    c->settings().query = -1;  // the input got shorter than the query row
  if (analysis_ && core::heavy_key(analysis_->session) == core::heavy_key(a->session) &&
      sweep_gen_ == analysis_->generation)
    sweep_gen_ = a->generation;  // a new selection keeps the sweep of the same input
  analysis_ = a;
  if (!refinement) {
    analysis_pending_ = false;
    analysis_s_ = seconds;
  }
  publish_document();
  request_steps();
  model_->show_info(a->info, QString::fromStdString(a->model_summary), a->n_layers(), a->n_heads());
  interventions_->show_analysis(a);
  attribution_->show_analysis(a);
  if (attribution_on_open_ && !refinement && a->model) {
    attribution_on_open_ = false;
    attribution_->run();
  }
  qk_->show_analysis(a);
  if (qk_on_open_ && !refinement && a->model) {
    qk_on_open_ = false;
    qk_->compute();
  }
  if (!a->tokens.empty() || a->vision())
    input_->set_tokens(a->session.input.text, a->tokens, core::received_mass(*a), doc_->heat.sinks,
                       QString::fromStdString(a->notice));
  else
    input_->set_tokens({}, {}, {}, {}, QString::fromStdString(a->model_summary));
  if (!refinement) tile_timer_.start(0);
  view_->redraw();
  update_status();
  if (qEnvironmentVariableIsSet("ATTNSCOPE_GUI_TRACE"))
    std::fprintf(stderr, "[trace] on_analysis %.1f ms\n", trace.nsecsElapsed() / 1e6);
}

void MainWindow::on_tiles(uint64_t generation, std::vector<render::PanelTile> tiles,
                          double seconds) {
  if (!analysis_ || generation != analysis_->generation) return;
  if (generation == requested_gen_) tiles_pending_ = false;
  shown_gen_ = generation;
  shown_serial_ = requested_serial_;
  tiles_s_ = seconds;
  tiles_gpu_ = !tiles.empty() && tiles.front().gpu;
  ++tiles_received_;
  if (view_->canvas()) view_->canvas()->set_tiles(generation, std::move(tiles));
  view_->redraw();
  update_status();
}

void MainWindow::on_frame() {
  render::Canvas* c = view_->canvas();
  if (!c || !analysis_ || analysis_pending_) return;
  const render::TileWant w = c->wanted_tiles();
  if (w.w <= 0) return;
  if ((w.serial != requested_serial_ || analysis_->generation != requested_gen_) &&
      !tile_timer_.isActive())
    tile_timer_.start(25);
  static int n = 0;
  if (++n % 10 == 0) update_status();
}

bool MainWindow::settled() const {
  render::Canvas* c = view_->canvas();
  if (!c || analysis_pending_ || tiles_pending_ || analysis_timer_.isActive() ||
      tile_timer_.isActive())
    return false;
  // No text: the empty-input state (show_empty_input) is all there is to show.
  if (!analysis_) return session_.input.kind == "text" && input_->text().empty();
  return shown_gen_ == analysis_->generation && shown_serial_ == c->wanted_tiles().serial;
}

bool MainWindow::worker_idle() const {
  return worker_->idle() && !analysis_pending_ && !tiles_pending_;
}

void MainWindow::update_status() {
  const bool busy = analysis_pending_ || tiles_pending_ || !stage_.isEmpty();
  busy_->setVisible(busy);
  if (last_error_.isEmpty())
    stage_label_->setText(!stage_.isEmpty() ? stage_
                          : analysis_ || (session_.input.kind == "text" && input_->text().empty())
                              ? QString::fromStdString(doc_ ? doc_->title : "")
                              : "starting...");
  QString t;
  if (analysis_) {
    t = QString("forward %1 ms · variants %2 ms · update %3 ms · tiles %4 ms")
            .arg(analysis_->forward_seconds * 1e3, 0, 'f', 1)
            .arg(analysis_->variants_seconds * 1e3, 0, 'f', 1)
            .arg(analysis_s_ * 1e3, 0, 'f', 0)
            .arg(tiles_s_ * 1e3, 0, 'f', 0) +
        (tiles_gpu_ ? " (gpu)" : "");
  }
  const auto& iv = view_->frame_intervals();
  if (!iv.empty()) {
    const size_t n = std::min<size_t>(iv.size(), 30);
    std::vector<double> last(iv.end() - ptrdiff_t(n), iv.end());
    std::nth_element(last.begin(), last.begin() + ptrdiff_t(n / 2), last.end());
    t += QString(" · frame %1 ms").arg(last[n / 2], 0, 'f', 1);
  }
  timing_label_->setText(t);
}

void MainWindow::open_text_file(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    QMessageBox::warning(this, "Open text", "Cannot open " + path);
    return;
  }
  session_.input.kind = "text";
  if (model_->model() == "default-vision") model_->set_model("default-text");
  input_->set_text(QString::fromUtf8(f.readAll()));
  add_recent(path);
}

QString MainWindow::export_figure(const QString& path) {
  const core::Session s = current_session();
  const int shown = view_->canvas() ? int(view_->canvas()->settings().view) : 0;
  if (shown == int(render::ViewKind::Attribution)) return export_attribution(path, s);
  if (shown == int(render::ViewKind::Qk)) return export_qk(path, s);
  if (shown == int(render::ViewKind::Steps)) return export_steps(path, s);
  if (!analysis_ || core::heavy_key(s) != core::heavy_key(analysis_->session) ||
      !analysis_->has_metrics() || analysis_->preview())
    return "The analysis of these inputs is still running: export when the comparisons are in.";
  try {
    // The analysis with the view as shown now (selection, colour map, grid metric, axes).
    const auto a = core::reselect(*analysis_, s);
    const int v = view_->canvas() ? int(view_->canvas()->settings().view) : 0;
    const fig::FigureSize size =
        fig::export_view(*a, core::view_from_name(kSessionViews[v]), path.toStdString(), s.figure);
    show_exported(path, size);
    return {};
  } catch (const Error& e) {
    return QString::fromUtf8(e.what());
  }
}

QString MainWindow::export_attribution(const QString& path, const core::Session& s) {
  const auto run = attribution_->result();
  const auto on = attribution_->ran_on();
  if (!run || !on) return "No attribution to export: run one from the Attribution dock first.";
  // The attribute verb's figure preset, from the run the view shows.
  return export_data(path, s, [&] {
    return core::attribution_figure(run->attribution, run->agreement,
                                    run->faithfulness ? &*run->faithfulness : nullptr, on->input,
                                    on->session.model.id);
  });
}

QString MainWindow::export_qk(const QString& path, const core::Session& s) {
  const auto run = qk_->result();
  const auto on = qk_->ran_on();
  if (!run || !on) return "No Q/K map to export: compute one from the Q/K map dock first.";
  // The qk verb's figure preset, from the map the view shows.
  return export_data(path, s,
                     [&] { return core::qk_figure(run->embedding, on->session.model.id); });
}

QString MainWindow::export_steps(const QString& path, const core::Session& s) {
  // The explain-head verb's figure preset, from the steps the view shows: those of the current
  // analysis with the selected head (the step-through job follows every analysis).
  const auto steps = head_steps_;
  const auto on = head_steps_on_;
  if (!analysis_ || !on || core::heavy_key(s) != core::heavy_key(on->session) ||
      steps_ == nullptr || steps_->layer != s.layer || steps_->head != s.head)
    return "The step-through of this head is still being computed: export when the view shows "
           "it.";
  if (!steps) return QString::fromStdString("No step-through to export: " + steps_->message);
  return export_data(path, s, [&] { return core::steps_figure(*steps, on->session.model.id); });
}

QString MainWindow::export_data(const QString& path, const core::Session& s,
                                const std::function<core::FigureData()>& make) {
  try {
    const core::FigureData d = make();
    const fig::FigureSize size = fig::fit_height(d, s.figure);
    fig::export_figure(d, path.toStdString(), size);
    fig::write_sidecar(s, session_path_, path.toStdString(), d.view, size);
    show_exported(path, size);
    return {};
  } catch (const Error& e) {
    return QString::fromUtf8(e.what());
  }
}

void MainWindow::show_exported(const QString& path, const core::FigureSize& size) {
  statusBar()->showMessage(QString("Exported %1 (%2 x %3 px at %4 dpi) and its session")
                               .arg(path)
                               .arg(size.width)
                               .arg(size.height)
                               .arg(size.dpi),
                           8000);
}

QString MainWindow::image_dialog_dir() const {
  if (!session_.input.image.empty())
    return QFileInfo(QString::fromStdString(session_.input.image)).absolutePath();
  return bundled_dir("images");
}

void MainWindow::open_image(const QString& path) {
  const bool to_vision = model_->model() != "default-vision" && !(analysis_ && analysis_->vision());
  try {
    core::check_image_opens(path.toStdString());
    if (to_vision) core::check_model_opens("default-vision");
  } catch (const Error& e) {
    show_error(this, "Open image", QString::fromUtf8(e.what()));
    return;
  }
  session_.input.image = path.toStdString();
  session_.input.kind = "image";
  input_->set_image(path);
  if (to_vision) model_->set_model("default-vision");
  schedule_analysis(0);
  add_recent(path);
}

void MainWindow::open_model_folder(const QString& dir) {
  bool vision = false;
  try {
    vision = core::check_model_opens(dir.toStdString());
  } catch (const Error& e) {
    show_error(this, "Open model folder", QString::fromUtf8(e.what()));
    return;
  }
  if (!maybe_save("Open model " + QFileInfo(dir).fileName())) return;
  // The input follows the model's kind: a vision model gets an image (the bundled one when none
  // was chosen), a text model the text.
  if (vision && session_.input.image.empty()) {
    const QString img = bundled_image();
    session_.input.image = img.toStdString();
    input_->set_image(img);
  }
  if (vision && !session_.input.image.empty())
    session_.input.kind = "image";
  else if (!vision && session_.input.kind == "image")
    session_.input.kind = "text";
  model_->set_model(dir);
  add_recent(dir);
}

void MainWindow::set_highlight(std::vector<int> tokens, std::vector<std::pair<int, int>> cells) {
  highlight_tokens_ = std::move(tokens);
  highlight_cells_ = std::move(cells);
  if (render::Canvas* c = view_->canvas()) {
    c->settings().highlight_tokens = highlight_tokens_;
    c->settings().highlight_cells = highlight_cells_;
  }
  view_->redraw();
}

void MainWindow::show_session_data(const core::Session& s, const std::string& base_path) {
  session_ = s;
  session_path_ = base_path;
  attribution_on_open_ = s.view.view == "attribution" && !s.attribution.empty();
  qk_on_open_ = s.view.view == "qk";
  show_session();
  submit_now();
}

core::Session MainWindow::current_session() {
  sync_session();
  core::Session s = session_;
  // Saved elsewhere, paths are made absolute (save_session_as makes them relative again).
  if (!session_path_.empty()) {
    if (s.input.kind == "image")
      s.input.image = core::resolve_session_path(session_path_, s.input.image);
    if (s.input.kind == "tensors")
      s.input.tensors = core::resolve_session_path(session_path_, s.input.tensors);
    if (!core::is_default_model_name(s.model.id))
      s.model.id = core::resolve_session_path(session_path_, s.model.id);
  }
  return s;
}

bool MainWindow::save_session_as(const QString& path) {
  core::Session s = current_session();
  try {
    core::fill_hashes(s, path.toStdString());
    core::save_session(s, path.toStdString());
    add_recent(path);
    saved_path_ = path;
    modified_ = false;
    update_title();
    statusBar()->showMessage("Saved session to " + path, 5000);
    return true;
  } catch (const Error& e) {
    show_error(this, "Save session", QString::fromUtf8(e.what()));
    return false;
  }
}

void MainWindow::set_view(render::ViewKind v) {
  if (view_->canvas()) view_->canvas()->settings().view = v;
  view_->redraw();
}

void MainWindow::set_dark(bool dark) {
  dark_ = dark;
  qApp->setStyle(QStyleFactory::create("Fusion"));
  QPalette p = qApp->style()->standardPalette();
  if (dark) {
    p.setColor(QPalette::Window, QColor(37, 38, 41));
    p.setColor(QPalette::WindowText, QColor(225, 225, 225));
    p.setColor(QPalette::Base, QColor(27, 28, 30));
    p.setColor(QPalette::AlternateBase, QColor(45, 46, 50));
    p.setColor(QPalette::Text, QColor(225, 225, 225));
    p.setColor(QPalette::Button, QColor(48, 49, 53));
    p.setColor(QPalette::ButtonText, QColor(225, 225, 225));
    p.setColor(QPalette::Highlight, QColor(66, 133, 244));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::ToolTipBase, QColor(45, 46, 50));
    p.setColor(QPalette::ToolTipText, QColor(225, 225, 225));
    p.setColor(QPalette::Mid, QColor(140, 140, 145));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(120, 120, 120));
  }
  qApp->setPalette(p);
  if (view_->canvas()) view_->canvas()->settings().dark = dark;
  input_->set_tokens(analysis_ ? analysis_->session.input.text : "",
                     analysis_ ? analysis_->tokens : std::vector<core::Token>{},
                     analysis_ ? core::received_mass(*analysis_) : std::vector<float>{},
                     doc_ ? doc_->heat.sinks : std::vector<int>{},
                     analysis_ ? QString::fromStdString(analysis_->notice) : QString());
  view_->redraw();
}

void MainWindow::set_presentation(bool on) {
  if (on == presentation_) return;
  presentation_ = on;
  if (on) {
    // The view gets the room (docks hidden) and draws with its presentation font; the layout
    // is put back exactly on the way out. A dock shown meanwhile keeps the normal font, so its
    // text still fits.
    before_presentation_ = saveState();
    for (QDockWidget* d : findChildren<QDockWidget*>()) d->hide();
  } else {
    restoreState(before_presentation_);
  }
  if (presentation_action_ && presentation_action_->isChecked() != on)
    presentation_action_->setChecked(on);
  if (view_->canvas()) view_->canvas()->settings().presentation = on;
  lessons_->set_presentation(on);  // the caption stays, in large type
  view_->redraw();
}

void MainWindow::add_recent(const QString& path) {
  if (!options_.use_settings) return;
  QSettings s;
  QStringList r = s.value("recent").toStringList();
  r.removeAll(path);
  r.prepend(path);
  while (r.size() > 10) r.removeLast();
  s.setValue("recent", r);
  rebuild_recent();
}

void MainWindow::rebuild_recent() {
  recent_menu_->clear();
  const QStringList r =
      options_.use_settings ? QSettings().value("recent").toStringList() : QStringList();
  for (const QString& p : r)
    recent_menu_->addAction(p, this, [this, p] {
      if (QFileInfo(p).isDir())
        open_model_folder(p);
      else if (p.endsWith(".json", Qt::CaseInsensitive))
        open_session(p);
      else if (is_image_file(p))
        open_image(p);
      else
        open_text_file(p);
    });
  recent_menu_->setEnabled(!r.isEmpty());
}

void MainWindow::save_png() {
  const QString f =
      QFileDialog::getSaveFileName(this, "Save view as PNG", "attnscope.png", "PNG (*.png)");
  if (f.isEmpty()) return;
  if (!view_->grab_rgba().save(f))
    QMessageBox::warning(this, "Save view", "Could not write " + f);
  else
    statusBar()->showMessage("Saved the view to " + f, 5000);
}

DecodeDialog* MainWindow::open_decode_lab() {
  const core::Session s = current_session();
  auto* d = new DecodeDialog(s.model.id, s.input.text, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->show();
  return d;
}

void MainWindow::about() {
  QMessageBox::about(
      this, "About attnscope",
      "<h3>attnscope 0.1.0</h3>"
      "<p>Runs attention variants live inside real transformer models and shows, side by side, "
      "what each variant attends to, what it drops, where the sinks are, and what it costs.</p>"
      "<p>Licences of the libraries it uses: Qt 6 (LGPL-3.0), Dear ImGui (MIT), Vulkan loader "
      "(Apache-2.0), Eigen (MPL-2.0), nlohmann/json (MIT), stb (public domain / MIT), PCRE2 "
      "(BSD), SentencePiece (Apache-2.0), CLI11 (BSD-3-Clause), DejaVu fonts (free licence).</p>");
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (!close_unasked_ && !maybe_save("Quit")) {
    e->ignore();
    return;
  }
  // Closed without asking, with unsaved changes: the autosave keeps them to recover.
  const bool keep_autosave = close_unasked_ && modified_;
  if (keep_autosave) autosave_now();
  // Qt destroys the view's Vulkan device when the window closes, and the worker may be
  // submitting compute to it.
  if (analysis_pending_ || tiles_pending_) resubmit_on_show_ = true;
  release_view_device();
  attribution_->stop();
  qk_->stop();
  // A clean close: nothing to recover next time.
  autosave_timer_.stop();
  if (!autosave_path_.isEmpty() && !keep_autosave) QFile::remove(autosave_path_);
  if (options_.use_settings) {
    QSettings s;
    s.setValue("window/geometry", saveGeometry());
    // The layout the user arranged, not presentation mode's.
    s.setValue("window/state", presentation_ ? before_presentation_ : saveState());
    s.setValue("view/dark", dark_);
  }
  QMainWindow::closeEvent(e);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  for (const QUrl& u : e->mimeData()->urls()) {
    const QString p = u.toLocalFile();
    if (p.isEmpty()) continue;
    if (core::is_lesson_path(p.toStdString()))
      lessons_->open(p);
    else if (QFileInfo(p).isDir())
      open_model_folder(p);
    else if (p.endsWith(".json", Qt::CaseInsensitive))
      open_session(p);
    else if (is_image_file(p))
      open_image(p);
    else
      open_text_file(p);
    break;
  }
}

}  // namespace attn::gui
