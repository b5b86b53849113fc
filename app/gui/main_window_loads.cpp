// The main window's loads and its document state: a session (file, drag and drop, --session,
// recovery, a lesson's step), a tensors folder; unsaved changes, the title, the quit question.
// A load is checked completely (app/core/session/session_check.h) before it changes anything,
// so a refused one leaves the window exactly as it was.
#include <QFileInfo>
#include <QStatusBar>

#include "app/core/session/session_check.h"
#include "app/gui/attribution_dock.h"
#include "app/gui/dialogs.h"
#include "app/gui/input_dock.h"
#include "app/gui/interventions_dock.h"
#include "app/gui/main_window.h"
#include "app/gui/model_dock.h"
#include "app/gui/qk_dock.h"
#include "app/gui/vulkan_view.h"
#include "compute/error.h"
#include "render/canvas.h"

namespace attn::gui {

bool MainWindow::open_session(const QString& path) {
  core::Session s;
  try {
    s = core::load_session(path.toStdString());
  } catch (const Error& e) {
    show_error(this, "Open session", QString::fromUtf8(e.what()));
    return false;
  }
  SessionLoad how;
  how.source = how.session_path = path;
  return load_session(s, how).isEmpty();
}

QString MainWindow::load_session(const core::Session& s, const SessionLoad& how) {
  core::SessionCheck check;
  try {
    check = core::check_session_opens(s, how.source.toStdString(), how.session_path.toStdString());
  } catch (const Error& e) {
    const QString msg = QString::fromUtf8(e.what());
    if (how.show_errors) show_error(this, "Open session", msg);
    statusBar()->showMessage("Not opened: " + msg, 10000);
    return msg;
  }
  if (how.ask_unsaved && !maybe_save("Open " + QFileInfo(how.source).fileName()))
    return "cancelled";
  // Everything checked: applied at once.
  session_ = s;
  session_path_ = how.session_path.toStdString();
  attribution_on_open_ = s.view.view == "attribution" && !s.attribution.empty();
  qk_on_open_ = s.view.view == "qk";
  saved_path_ = how.becomes_document ? how.session_path : QString();
  show_session();
  if (how.becomes_document) add_recent(how.session_path);
  modified_ = false;
  update_title();
  submit_now();
  if (how.show_errors)
    for (const std::string& w : check.warnings)
      show_warning(this, "Open session", "The session opens, but " + QString::fromUtf8(w));
  return {};
}

void MainWindow::open_tensors(const QString& dir) {
  try {
    core::check_tensors_open(dir.toStdString());
  } catch (const Error& e) {
    show_error(this, "Open tensors", QString::fromUtf8(e.what()));
    return;
  }
  model_->set_tensors(dir);
}

bool MainWindow::maybe_save(const QString& what) {
  if (!modified_) return true;
  const QString name = saved_path_.isEmpty() ? "the session" : QFileInfo(saved_path_).fileName();
  const auto b = ask_unsaved(this, what + ": save the changes to " + name + " first?");
  if (b == QMessageBox::Discard) return true;
  if (b != QMessageBox::Save) return false;
  if (saved_path_.isEmpty()) {
    save_as_dialog();
    return !modified_;
  }
  return save_session_as(saved_path_);
}

void MainWindow::mark_modified() {
  if (modified_) return;
  modified_ = true;
  update_title();
}

void MainWindow::update_title() {
  setWindowTitle(saved_path_.isEmpty()
                     ? "attnscope[*]"
                     : QFileInfo(saved_path_).fileName() + "[*] \u2014 attnscope");
  setWindowModified(modified_);
}

void MainWindow::close_without_asking() {
  close_unasked_ = true;
  close();
}

void MainWindow::show_empty_input() {
  // Nothing to analyse: no results of an earlier text stay on show.
  analysis_pending_ = tiles_pending_ = false;
  analysis_.reset();
  last_error_.clear();
  // Results of the earlier text still on their way are dropped when they come (on_analysis).
  auto d = std::make_shared<render::Document>();
  d->title = "No text: type in the Input dock or open a text file (Ctrl+O).";
  add_attribution(*d);
  add_qk(*d);
  doc_ = d;
  if (view_->canvas()) view_->canvas()->set_document(doc_);
  view_->redraw();
  input_->set_tokens({}, {}, {}, {}, "No text yet.");
  interventions_->show_no_input();
  attribution_->show_analysis(nullptr);
  qk_->show_analysis(nullptr);
  update_status();
}

}  // namespace attn::gui
