#include "app/gui/lesson_player.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QCoreApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStatusBar>
#include <QTextBrowser>
#include <QTextFrame>
#include <QTextTable>
#include <QVBoxLayout>
#include <algorithm>

#include "app/core/analysis/analysis.h"
#include "app/core/session/labels.h"
#include "app/core/session/model_catalog.h"
#include "app/gui/main_window.h"
#include "compute/error.h"

namespace attn::gui {
namespace {

// The built-in lessons' folder: the source tree's assets/lessons, else the installed
// share/attnscope/lessons next to the executable; "" when neither exists.
QString lessons_dir() {
  QStringList dirs;
#ifdef ATTNSCOPE_SOURCE_DIR
  const QString no_tree = qEnvironmentVariable("ATTNSCOPE_NO_SOURCE_TREE");
  if (no_tree.isEmpty() || no_tree == "0")
    dirs << QString(ATTNSCOPE_SOURCE_DIR) + "/assets/lessons";
#endif
  dirs << QCoreApplication::applicationDirPath() + "/../share/attnscope/lessons";
  for (const QString& d : dirs)
    if (QFileInfo(d).isDir()) return QFileInfo(d).canonicalFilePath();
  return {};
}

// A lesson file's title without checking it (for the Help > Lessons menu).
QString lesson_title(const QString& path) {
  QFile f(path);
  if (f.open(QIODevice::ReadOnly)) {
    const auto j = nlohmann::json::parse(f.readAll().toStdString(), nullptr, false);
    if (j.is_object() && j.contains("title") && j["title"].is_string())
      return QString::fromStdString(j["title"].get<std::string>());
  }
  return QFileInfo(path).fileName();
}

// "`cat` (3)" for each highlighted token, "`sat` → `The` (2, 0)" for each cell, from the step's
// own input (its tokens as the model splits them; indices alone when that fails).
QString highlight_markdown(const core::LessonStep& st) {
  const core::LessonHighlight& h = st.highlight;
  if (h.empty()) return {};
  std::vector<std::string> labels;
  try {
    const core::Session& s = st.session;
    if (s.input.kind == "text") {
      const auto model = core::cached_model(s.model.id);
      if (!model->info().vision) {
        const core::TextInput in = core::encode_for_model(*model, s.input.text);
        labels = core::token_labels(s.input.text, in.tokens, in.labels);
      }
    }
  } catch (const std::exception&) {
    labels.clear();
  }
  auto label = [&labels](int t) {
    QString l = t < int(labels.size()) ? QString::fromStdString(labels[size_t(t)]) : QString();
    l.replace('`', '\'');
    return l.trimmed().isEmpty() ? QString("%1").arg(t)
                                 : QString("`%1` (%2)").arg(l.trimmed()).arg(t);
  };
  QStringList parts;
  for (int t : h.tokens) parts << label(t);
  for (const auto& [q, k] : h.cells) parts << label(q) + " \u2192 " + label(k);
  return "**Look at:** " + parts.join(", ");
}

}  // namespace

LessonPlayer::LessonPlayer(MainWindow* window) : QDockWidget("Lesson", window), window_(window) {
  setObjectName("lesson");
  auto* body = new QWidget;
  auto* top = new QHBoxLayout;
  heading_ = new QLabel;
  heading_->setTextFormat(Qt::PlainText);
  QFont bold = heading_->font();
  bold.setBold(true);
  heading_->setFont(bold);
  counter_ = new QLabel;
  back_button_ = new QPushButton("\u2190 Back");
  next_button_ = new QPushButton("Next \u2192");
  back_button_->setToolTip("Previous step (Page Up, Alt+Left)");
  next_button_->setToolTip("Next step (Page Down, Alt+Right)");
  back_button_->setFocusPolicy(Qt::NoFocus);
  next_button_->setFocusPolicy(Qt::NoFocus);
  top->addWidget(heading_, 1);
  top->addWidget(counter_);
  top->addSpacing(8);
  top->addWidget(back_button_);
  top->addWidget(next_button_);
  caption_ = new QTextBrowser;
  caption_->setOpenExternalLinks(true);
  caption_->setFrameShape(QFrame::NoFrame);
  caption_->document()->setDocumentMargin(6);
  auto* layout = new QVBoxLayout(body);
  layout->setContentsMargins(8, 4, 8, 6);
  layout->setSpacing(2);
  layout->addLayout(top);
  layout->addWidget(caption_, 1);
  setWidget(body);
  connect(back_button_, &QPushButton::clicked, this, [this] { back(); });
  connect(next_button_, &QPushButton::clicked, this, [this] { next(); });

  next_ = new QAction("&Next step", this);
  next_->setShortcuts({QKeySequence(Qt::Key_PageDown), QKeySequence(Qt::ALT | Qt::Key_Right)});
  back_ = new QAction("&Previous step", this);
  back_->setShortcuts({QKeySequence(Qt::Key_PageUp), QKeySequence(Qt::ALT | Qt::Key_Left)});
  connect(next_, &QAction::triggered, this, [this] { next(); });
  connect(back_, &QAction::triggered, this, [this] { back(); });
  window_->addAction(next_);
  window_->addAction(back_);
  update_controls();
  hide();
}

void LessonPlayer::add_file_actions(QMenu* file) {
  file->addAction("Open &lesson...", this, [this] {
    const QString f = QFileDialog::getOpenFileName(
        window_, "Open lesson", lessons_dir(),
        QString("Lessons (*%1);;All files (*)").arg(core::kLessonSuffix));
    if (!f.isEmpty()) open(f);
  });
  add_ = file->addAction("&Add step to lesson...", this, [this] { record_step(); });
  save_ = file->addAction("Save lesson &as...", this, [this] {
    const QString f = QFileDialog::getSaveFileName(
        window_, "Save lesson as",
        path_.empty() ? QString("lesson") + core::kLessonSuffix : QString::fromStdString(path_),
        QString("Lessons (*%1)").arg(core::kLessonSuffix));
    if (f.isEmpty()) return;
    const QString err = save_as(f);
    if (!err.isEmpty()) QMessageBox::warning(window_, "Save lesson", err);
  });
  update_controls();
}

void LessonPlayer::add_help_actions(QMenu* help) {
  QMenu* lessons = help->addMenu("&Lessons");
  for (const QString& p : builtin_lessons())
    lessons->addAction(lesson_title(p), this, [this, p] { open(p); });
  lessons->setEnabled(!lessons->isEmpty());
  help->addSeparator();
}

QStringList LessonPlayer::builtin_lessons() {
  const QString d = lessons_dir();
  if (d.isEmpty()) return {};
  QStringList out;
  for (const QString& f :
       QDir(d).entryList({QString("*") + core::kLessonSuffix}, QDir::Files, QDir::Name))
    out << d + "/" + f;
  return out;
}

QString LessonPlayer::open(const QString& path) {
  core::Lesson l;
  try {
    l = core::load_lesson(path.toStdString());  // checked completely before anything changes
  } catch (const std::exception& e) {
    fail("Open lesson", QString::fromUtf8(e.what()));
    return last_error_;
  }
  // Unsaved work in the window is asked about before the lesson replaces it.
  if (!window_->maybe_save("Open lesson " + QFileInfo(path).fileName())) return "cancelled";
  last_error_.clear();
  lesson_ = std::move(l);
  path_ = path.toStdString();
  show();
  raise();
  go(0);
  return last_error_;
}

void LessonPlayer::go(int k) {
  if (lesson_.steps.empty()) return;
  k = std::clamp(k, 0, steps() - 1);
  step_ = k;
  const core::LessonStep& st = lesson_.steps[size_t(k)];
  // A step opens as any session does (checked completely, then applied at once); it does not
  // become the window's document, so Ctrl+S asks where to save.
  MainWindow::SessionLoad how;
  how.source = QString::fromStdString(path_) + QString(", step %1").arg(k + 1);
  how.session_path = QString::fromStdString(path_);
  how.becomes_document = false;
  how.ask_unsaved = false;  // asked once, when the lesson opened
  how.show_errors = false;
  if (const QString err = window_->load_session(st.session, how); !err.isEmpty()) {
    fail("Open lesson", err);
    return;
  }
  window_->set_highlight(st.highlight.tokens, st.highlight.cells);  // after: opening clears them
  window_->setWindowTitle(
      QString::fromStdString(lesson_.title) +
      QString(" \u2014 step %1 of %2 \u2014 attnscope").arg(k + 1).arg(steps()));
  show_caption();
  update_controls();
}

void LessonPlayer::closeEvent(QCloseEvent* e) {
  window_->set_highlight({}, {});  // the lesson closed: the views stop pointing at its tokens
  QDockWidget::closeEvent(e);
}

void LessonPlayer::show_caption() {
  const core::LessonStep& st = lesson_.steps[size_t(step_)];
  heading_->setText(QString::fromStdString(lesson_.title));
  counter_->setText(QString("Step %1 of %2").arg(step_ + 1).arg(steps()));
  QString md;
  if (!st.title.empty()) md += "### " + QString::fromStdString(st.title) + "\n\n";
  if (step_ == 0 && !lesson_.description.empty())
    md += "*" + QString::fromStdString(lesson_.description).trimmed() + "*\n\n";
  md += QString::fromStdString(st.caption);
  const QString h = highlight_markdown(st);
  if (!h.isEmpty()) md += "\n\n" + h;
  caption_->setMarkdown(md);
  // Markdown tables come with doubled borders: one thin rule, some room in the cells.
  for (QTextFrame* f : caption_->document()->rootFrame()->childFrames())
    if (auto* t = qobject_cast<QTextTable*>(f)) {
      QTextTableFormat tf = t->format();
      tf.setBorderCollapse(true);
      tf.setBorder(1);
      tf.setBorderBrush(palette().color(QPalette::Mid));
      tf.setCellPadding(3);
      tf.setCellSpacing(0);
      t->setFormat(tf);
    }
}

void LessonPlayer::update_controls() {
  const bool on = playing();
  back_->setEnabled(on && step_ > 0);
  next_->setEnabled(on && step_ + 1 < steps());
  back_button_->setEnabled(back_->isEnabled());
  next_button_->setEnabled(next_->isEnabled());
  if (save_) save_->setEnabled(on);
  if (!on) {
    heading_->setText("No lesson");
    counter_->clear();
  }
}

void LessonPlayer::add_step(const QString& title, const QString& caption) {
  core::LessonStep st;
  st.title = title.toStdString();
  st.caption = caption.trimmed().isEmpty() ? std::string("(no caption)") : caption.toStdString();
  st.session = window_->current_session();
  if (lesson_.steps.empty()) {
    lesson_ = core::Lesson{};
    lesson_.title = "Recorded lesson";
    path_.clear();
  }
  lesson_.steps.push_back(std::move(st));
  step_ = steps() - 1;
  show();
  show_caption();
  update_controls();
  window_->statusBar()->showMessage(
      QString("Added step %1 to the lesson (File > Save lesson as... writes it)").arg(steps()),
      5000);
}

QString LessonPlayer::save_as(const QString& path) {
  try {
    core::Lesson l = lesson_;
    for (core::LessonStep& st : l.steps) core::fill_hashes(st.session, path.toStdString());
    core::save_lesson(l, path.toStdString());
    lesson_ = std::move(l);
    path_ = path.toStdString();
    window_->statusBar()->showMessage("Saved the lesson to " + path, 5000);
    return {};
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
}

void LessonPlayer::record_step() {
  QDialog d(window_);
  d.setWindowTitle("Add step to lesson");
  auto* title = new QLineEdit;
  title->setPlaceholderText("optional");
  auto* caption = new QPlainTextEdit;
  caption->setPlaceholderText(
      "What the audience should see here (Markdown: **bold**, *italic*, "
      "lists, `code`)");
  caption->setMinimumSize(460, 160);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, &d, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
  auto* form = new QFormLayout(&d);
  form->addRow(new QLabel(QString("The current session becomes step %1 of %2.")
                              .arg(steps() + 1)
                              .arg(playing() ? lesson_.title.c_str() : "a new lesson")));
  form->addRow("Title", title);
  form->addRow("Caption", caption);
  form->addRow(buttons);
  if (d.exec() == QDialog::Accepted) add_step(title->text(), caption->toPlainText());
}

void LessonPlayer::set_presentation(bool on) {
  presentation_ = on;
  QFont f = QApplication::font();
  f.setPointSizeF(f.pointSizeF() * (on ? 1.6 : 1.0));
  caption_->setFont(f);
  QFont h = heading_->font();
  h.setPointSizeF(f.pointSizeF());
  heading_->setFont(h);
  counter_->setFont(f);
  if (playing()) {
    show();
    show_caption();
  }
}

void LessonPlayer::fail(const QString& title, const QString& message) {
  last_error_ = message;
  window_->statusBar()->showMessage(message, 15000);
  // Not modal: nothing waits on it, and the app stays as it was.
  auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, window_);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

}  // namespace attn::gui
