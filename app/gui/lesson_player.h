// The lesson player (app/core/teaching/lesson.h): a dock under the views with the step's caption
// (Markdown), "Step k of n" and Back/Next; the lesson actions of the menus (File > Open lesson,
// Add step, Save lesson as; Help > Lessons, the built-in ones); Next/Back on PageDown/PageUp and
// Alt+Right/Alt+Left. A step is shown by opening its session as File > Open session does; the
// audience may then edit anything, and the step is applied again only on Next/Back.
#pragma once
#include <QDockWidget>
#include <QString>
#include <QStringList>
#include <string>

#include "app/core/teaching/lesson.h"

class QAction;
class QCloseEvent;
class QLabel;
class QMenu;
class QPushButton;
class QTextBrowser;

namespace attn::gui {

class MainWindow;

class LessonPlayer : public QDockWidget {
  Q_OBJECT
 public:
  explicit LessonPlayer(MainWindow* window);

  // File > Open lesson..., Add step to lesson..., Save lesson as... into `file`.
  void add_file_actions(QMenu* file);
  // Help > Lessons: the built-in lessons.
  void add_help_actions(QMenu* help);

  // Opens and checks a lesson file, then shows its first step. A lesson that fails to load
  // changes nothing (state, views, title) and says why, naming the file, step and field.
  // Returns "" or that message.
  QString open(const QString& path);
  // Shows step `k` (0-based, clamped): its session is opened, its caption shown.
  void go(int k);
  void next() { go(step_ + 1); }
  void back() { go(step_ - 1); }
  // Recording: the window's current session and `caption` (Markdown) appended as a step of the
  // open lesson (a new lesson when none is open); the step shown becomes it.
  void add_step(const QString& title, const QString& caption);
  // Writes the open lesson atomically. Returns "" or the error.
  QString save_as(const QString& path);
  // Large fonts for presentation mode.
  void set_presentation(bool on);

  bool playing() const { return !lesson_.steps.empty(); }
  int step() const { return step_; }
  int steps() const { return int(lesson_.steps.size()); }
  const core::Lesson& lesson() const { return lesson_; }
  QString path() const { return QString::fromStdString(path_); }
  QString last_error() const { return last_error_; }
  QTextBrowser* caption() const { return caption_; }
  QAction* next_action() const { return next_; }
  QAction* back_action() const { return back_; }

  // The built-in lessons (assets/lessons, installed in share/attnscope/lessons), sorted by name.
  static QStringList builtin_lessons();

 protected:
  // Closing the Lesson panel clears the step's highlights from the views.
  void closeEvent(QCloseEvent* e) override;

 private:
  void show_caption();
  void update_controls();
  void record_step();  // the Add step dialog
  void fail(const QString& title, const QString& message);

  MainWindow* window_;
  core::Lesson lesson_;
  std::string path_;  // the lesson file ("" = recorded, not saved)
  int step_ = -1;
  QString last_error_;
  QLabel* heading_ = nullptr;
  QLabel* counter_ = nullptr;
  QTextBrowser* caption_ = nullptr;
  QPushButton* back_button_ = nullptr;
  QPushButton* next_button_ = nullptr;
  QAction* next_ = nullptr;
  QAction* back_ = nullptr;
  QAction* add_ = nullptr;
  QAction* save_ = nullptr;
  bool presentation_ = false;
};

}  // namespace attn::gui
