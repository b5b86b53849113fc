// The app's state under loads that fail, unsaved changes and emptied inputs (the real window under
// Xvfb, the default models): a refused session, image, model or tensors folder changes nothing;
// quitting or opening another session with unsaved changes asks first; the gui verb refuses a
// misspelt variant; the head grid offers every metric at the default size; the Interventions
// dock, the input dock and a saved session follow the input they describe.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QDropEvent>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QMimeData>
#include <QPainter>
#include <QPlainTextEdit>
#include <QTableWidget>
#include <QTimer>
#include <QUrl>
#include <QVulkanInstance>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/cli/usage.h"
#include "app/core/analysis/interactive.h"
#include "app/core/session/session.h"
#include "app/gui/dialogs.h"
#include "app/gui/gui_app.h"
#include "app/gui/input_dock.h"
#include "app/gui/interventions_dock.h"
#include "app/gui/main_window.h"
#include "app/gui/model_dock.h"
#include "app/gui/variants_dock.h"
#include "app/gui/vulkan_view.h"
#include "gui_driver.h"
#include "gui_test_main.h"
#include "models/arch/default_models.h"

namespace attn::gui::test {
namespace {

namespace fs = std::filesystem;
QVulkanInstance* g_instance = nullptr;

// Answers the window's dialogs through the test hook (set_dialog_hook): "unsaved" with the
// button chosen, errors with OK. A message box shown without the hook is closed too, so a
// window that still shows one never hangs the test. Every text is kept.
class Answers {
 public:
  explicit Answers(QMessageBox::StandardButton unsaved = QMessageBox::Cancel) : unsaved_(unsaved) {
    previous_ = set_dialog_hook([this](const DialogRequest& r) {
      texts.push_back((r.kind + ": " + r.text).toStdString());
      return r.kind == "unsaved" ? unsaved_ : QMessageBox::Ok;
    });
    timer_.setInterval(20);
    QObject::connect(&timer_, &QTimer::timeout, [this] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (!box || !box->isVisible()) return;
      texts.push_back(("modal: " + box->text()).toStdString());
      box->reject();
    });
    timer_.start();
  }
  ~Answers() { set_dialog_hook(previous_); }
  Answers(const Answers&) = delete;
  Answers& operator=(const Answers&) = delete;
  void set_unsaved(QMessageBox::StandardButton b) { unsaved_ = b; }
  int count(const std::string& prefix) const {
    int n = 0;
    for (const std::string& t : texts) n += t.rfind(prefix, 0) == 0;
    return n;
  }
  std::string all() const {
    std::string s;
    for (const std::string& t : texts) s += t + "\n";
    return s;
  }
  std::vector<std::string> texts;

 private:
  QMessageBox::StandardButton unsaved_;
  DialogHook previous_;
  QTimer timer_;
};

void show(MainWindow& w) {
  w.view()->setVulkanInstance(g_instance);
  w.show();
  wait_until([&] { return w.view()->frames_drawn() > 0; }, 20000);
}

// The window as a user sees it: the docks, the Vulkan view painted in, the title above.
void save_shot(MainWindow& w, const QString& name) {
  const QImage win = w.grab().toImage();
  const QImage view = w.view()->grab_rgba();
  QImage img(win.width(), win.height() + 28, QImage::Format_RGB32);
  img.fill(QColor(60, 60, 66));
  QPainter p(&img);
  p.drawImage(0, 28, win);
  QWidget* c = w.centralWidget();
  p.drawImage(QRect(c->mapTo(&w, QPoint(0, 28)), c->size()), view);
  p.setPen(Qt::white);
  p.drawText(QRect(8, 0, img.width() - 16, 28), Qt::AlignVCenter,
             w.windowTitle().replace("[*]", w.isWindowModified() ? "*" : ""));
  p.end();
  img.save(screenshot_path(name));
}

QString model_info(MainWindow& w) {
  QString s;
  for (QLabel* l : w.model_dock()->findChildren<QLabel*>()) s += l->text() + "\n";
  return s;
}

QString input_info(MainWindow& w) {
  QString s;
  for (QLabel* l : w.input_dock()->findChildren<QLabel*>()) s += l->text() + "\n";
  return s;
}

QAction* action_on(MainWindow& w, const QKeySequence& keys) {
  for (QAction* a : w.findChildren<QAction*>())
    if (a->shortcut() == keys) return a;
  return nullptr;
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("attnscope-state-" + name)).string();
}

core::Session old_session() {
  core::Session s;
  s.input.text = "The keeper of the lighthouse wrote every evening in a small book.";
  s.variants = {"window(size=8)", "topk(k=4)"};
  s.ablation.heads = {"L0H1"};
  s.patch.corrupt = "The keeper of the lighthouse sang every evening in a small book.";
  s.patch.target = " book";
  s.patch.foil = " boat";
  return s;
}

// What must not change when a load is refused.
struct Shown {
  std::string text;
  std::vector<std::string> variants, ablation;
  std::string corrupt, model, title;
  bool modified = false;
  std::shared_ptr<const core::Analysis> analysis;
  QString info;
  int grid_rows = 0, grid_cols = 0;
};

Shown shown(MainWindow& w) {
  Shown s;
  s.text = w.input_dock()->text();
  s.variants = w.variants_dock()->specs();
  s.ablation = w.interventions_dock()->ablation().heads;
  s.corrupt = w.interventions_dock()->patch_setup().corrupt;
  s.model = w.model_dock()->model();
  s.title = w.windowTitle().toStdString();
  s.modified = w.isWindowModified();
  s.analysis = w.analysis();
  s.info = model_info(w);
  s.grid_rows = w.interventions_dock()->grid()->rowCount();
  s.grid_cols = w.interventions_dock()->grid()->columnCount();
  return s;
}

void expect_unchanged(const Shown& a, MainWindow& w, const std::string& what) {
  const Shown b = shown(w);
  EXPECT_EQ(b.text, a.text) << what << ": the Input dock changed";
  EXPECT_EQ(b.variants, a.variants) << what << ": the variants changed";
  EXPECT_EQ(b.ablation, a.ablation) << what << ": the ablation changed";
  EXPECT_EQ(b.corrupt, a.corrupt) << what << ": the patching setup changed";
  EXPECT_EQ(b.model, a.model) << what << ": the model changed";
  EXPECT_EQ(b.title, a.title) << what << ": the title changed";
  EXPECT_EQ(b.modified, a.modified) << what << ": the modified flag changed";
  EXPECT_EQ(b.analysis, a.analysis) << what << ": the views changed";
  EXPECT_EQ(b.info, a.info) << what << ": the model info changed";
  EXPECT_EQ(b.grid_rows, a.grid_rows) << what << ": the Interventions grid changed";
  EXPECT_EQ(b.grid_cols, a.grid_cols) << what << ": the Interventions grid changed";
}

// Item 1: a session with a misspelt variant is refused with a message naming the file and the
// field; the window keeps the old session (Input dock, variants, interventions, views, title),
// and Ctrl+S then saves the old session over the old file. The same through drag and drop and
// through --session at start.
TEST(GuiState, ARefusedSessionChangesNothingAndCtrlSSavesTheOldOne) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  const std::string good = temp_path("old.attnscope.json");
  const std::string bad = temp_path("misspelt.attnscope.json");
  core::save_session(old_session(), good);
  core::Session b = old_session();
  b.input.text = "hello there";
  b.variants = {"windw(size=4)"};
  b.ablation = {};
  b.patch = {};
  core::save_session(b, bad);
  GuiOptions o = base_options();
  o.session = good;
  {
    MainWindow w(o);
    show(w);
    ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
    ASSERT_TRUE(wait_until([&] { return w.worker_idle(); }, 60000));
    const Shown before = shown(w);
    ASSERT_EQ(before.text, old_session().input.text);
    {
      Answers answers;
      w.open_session(QString::fromStdString(bad));
      wait_until([] { return false; }, 1500);  // whatever the refused load might still start
      wait_settled(w, 30000, 2);
      save_shot(w, "item1_misspelt_session.png");
      ASSERT_EQ(answers.texts.size(), 1u) << answers.all();
      const std::string& msg = answers.texts[0];
      EXPECT_NE(msg.find("misspelt.attnscope.json"), std::string::npos) << msg;
      EXPECT_NE(msg.find("variants[0]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("windw"), std::string::npos) << msg;
      EXPECT_NE(msg.find("did you mean window"), std::string::npos) << msg;
      expect_unchanged(before, w, "File > Open session");
      EXPECT_EQ(w.analysis()->session.input.text, before.text);
    }
    {
      // Drag and drop of the same file.
      Answers answers;
      QMimeData mime;
      mime.setUrls({QUrl::fromLocalFile(QString::fromStdString(bad))});
      QDropEvent drop(QPointF(200, 200), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
      // Straight to the window's handler (QApplication delivers drops only during a real drag).
      static_cast<QObject&>(w).event(&drop);
      wait_until([] { return false; }, 1500);
      wait_settled(w, 30000, 2);
      EXPECT_EQ(answers.count("error: "), 1) << answers.all();
      expect_unchanged(before, w, "drag and drop");
    }
    // Ctrl+S saves the old session to the old file; the refused file is untouched.
    QAction* save = action_on(w, QKeySequence(QKeySequence::Save));
    ASSERT_NE(save, nullptr);
    {
      Answers answers;
      save->trigger();
      EXPECT_TRUE(answers.texts.empty()) << answers.all();
    }
    const core::Session saved = core::load_session(good);
    EXPECT_EQ(saved.input.text, old_session().input.text);
    EXPECT_EQ(saved.variants, old_session().variants);
    EXPECT_EQ(saved.ablation.heads, old_session().ablation.heads);
    EXPECT_EQ(saved.patch.corrupt, old_session().patch.corrupt);
    const core::Session untouched = core::load_session(bad);
    EXPECT_EQ(untouched.input.text, "hello there");
    EXPECT_EQ(untouched.variants, std::vector<std::string>{"windw(size=4)"});
  }  // one window at a time (one Dear ImGui context)

  // --session at start: the window opens on its own inputs and says why.
  {
    Answers answers;
    GuiOptions o2 = base_options();
    o2.text = "Something to show instead.";
    o2.text_file.clear();
    o2.session = bad;
    MainWindow w2(o2);
    show(w2);
    wait_until([&] { return w2.analysis() != nullptr; }, 60000);
    EXPECT_EQ(answers.count("error: "), 1) << answers.all();
    EXPECT_EQ(w2.input_dock()->text(), o2.text);
    EXPECT_EQ(w2.variants_dock()->specs(), o2.variants);
    EXPECT_FALSE(w2.windowTitle().contains("misspelt")) << w2.windowTitle().toStdString();
  }
  fs::remove(good);
  fs::remove(bad);
}

// Item 2: File > Open image on a file that is not an image, with a text model loaded: a message
// naming the file; the model, views, model info and Interventions dock stay the text model's.
TEST(GuiState, OpenImageOnANonImageKeepsTheTextModel) {
  if (!have_model("default-text") || !have_model("default-vision"))
    GTEST_SKIP() << "default models not found";
  const std::string fake = temp_path("notes.png");
  {
    std::ofstream f(fake);
    f << "These are notes, not pixels.\n";
  }
  GuiOptions o = base_options();
  o.variants = {"window(size=8)"};
  MainWindow w(o);
  show(w);
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  ASSERT_TRUE(wait_until([&] { return w.worker_idle(); }, 60000));
  wait_settled(w, 30000, 2);
  const Shown before = shown(w);
  ASSERT_FALSE(before.analysis->vision());
  EXPECT_FALSE(before.modified) << "a window just started has no changes";
  Answers answers;
  w.open_image(QString::fromStdString(fake));
  wait_until([] { return false; }, 1500);
  wait_settled(w, 30000, 2);
  wait_until([&] { return w.worker_idle(); }, 60000);
  save_shot(w, "item2_open_non_image.png");
  EXPECT_EQ(answers.count("error: "), 1) << answers.all();
  EXPECT_NE(answers.all().find("notes.png"), std::string::npos) << answers.all();
  expect_unchanged(before, w, "File > Open image");
  EXPECT_EQ(w.model_dock()->model(), "default-text");
  EXPECT_TRUE(w.last_error().isEmpty()) << w.last_error().toStdString();
  fs::remove(fake);
}

// Refused model and tensors folders change nothing either.
TEST(GuiState, ARefusedModelOrTensorsFolderChangesNothing) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  const fs::path empty = temp_path("empty-folder");
  fs::create_directories(empty);
  MainWindow w(base_options());
  show(w);
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  ASSERT_TRUE(wait_until([&] { return w.worker_idle(); }, 60000));
  const Shown before = shown(w);
  Answers answers;
  w.open_model_folder(QString::fromStdString(empty.string()));
  wait_until([] { return false; }, 1000);
  EXPECT_EQ(answers.count("error: "), 1) << answers.all();
  EXPECT_NE(answers.all().find("empty-folder"), std::string::npos) << answers.all();
  expect_unchanged(before, w, "Open model folder");
  w.open_tensors(QString::fromStdString(empty.string()));
  wait_until([] { return false; }, 1000);
  EXPECT_EQ(answers.count("error: "), 2) << answers.all();
  expect_unchanged(before, w, "Open tensors");
  fs::remove_all(empty);
}

// Unsaved changes: quitting (Ctrl+Q) and opening another session or model ask first; Cancel
// keeps everything, Discard goes on, Save writes the session to its file first.
TEST(GuiState, UnsavedChangesAreAskedAboutOnQuitAndOpen) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  const std::string first = temp_path("first.attnscope.json");
  const std::string second = temp_path("second.attnscope.json");
  core::save_session(old_session(), first);
  core::Session other = old_session();
  other.input.text = "A second session about ships.";
  other.patch = {};
  core::save_session(other, second);
  GuiOptions o = base_options();
  o.session = first;
  MainWindow w(o);
  show(w);
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  EXPECT_FALSE(w.isWindowModified()) << "a session just opened has no changes";
  QAction* quit = action_on(w, QKeySequence(QKeySequence::Quit));
  ASSERT_NE(quit, nullptr);
  {
    Answers answers;  // nothing changed: no question
    quit->trigger();
    EXPECT_EQ(answers.count("unsaved: "), 0) << answers.all();
    EXPECT_FALSE(w.isVisible());
  }
  show(w);
  const std::string edited = "The keeper wrote nothing that evening.";
  w.input_dock()->editor()->setPlainText(QString::fromStdString(edited));
  EXPECT_TRUE(w.isWindowModified()) << "an edit marks the window modified";
  {
    Answers answers(QMessageBox::Cancel);
    quit->trigger();
    EXPECT_EQ(answers.count("unsaved: "), 1) << answers.all();
    EXPECT_TRUE(w.isVisible()) << "Cancel quit anyway";
    w.open_session(QString::fromStdString(second));
    EXPECT_EQ(answers.count("unsaved: "), 2) << answers.all();
    w.open_model_folder(QString::fromStdString(models::resolve_model_dir("default-text")));
    EXPECT_EQ(answers.count("unsaved: "), 3) << answers.all();
    EXPECT_EQ(w.input_dock()->text(), edited) << "Cancel opened the session anyway";
    EXPECT_EQ(w.model_dock()->model(), "default-text") << "Cancel opened the model anyway";
    EXPECT_TRUE(w.isWindowModified());
    save_shot(w, "unsaved_cancelled.png");
  }
  {
    Answers answers(QMessageBox::Discard);
    w.open_session(QString::fromStdString(second));
    EXPECT_EQ(answers.count("unsaved: "), 1) << answers.all();
    EXPECT_EQ(w.input_dock()->text(), other.input.text);
    EXPECT_FALSE(w.isWindowModified());
    EXPECT_EQ(core::load_session(first).input.text, old_session().input.text)
        << "Discard saved the edit";
  }
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  const std::string again = "Ships leave the harbour at dawn.";
  w.input_dock()->editor()->setPlainText(QString::fromStdString(again));
  {
    Answers answers(QMessageBox::Save);
    quit->trigger();
    EXPECT_EQ(answers.count("unsaved: "), 1) << answers.all();
    EXPECT_FALSE(w.isVisible());
    EXPECT_EQ(core::load_session(second).input.text, again) << "Save did not save";
  }
  fs::remove(first);
  fs::remove(second);
}

// Item 7: `attnscope gui --variants "windw(size=3)"` says what is wrong (a usage error, which
// the command line ends with exit 2, naming the spec with the suggestion) before any window
// opens, instead of opening with the dense panel alone.
TEST(GuiState, GuiVerbRefusesAMisspeltVariant) {
  CLI::App app;
  std::function<int()> action;
  const char* argv[] = {"attnscope", "gui", "--variants", "window(size=8);windw(size=3)"};
  add_gui_command(app, action, 4, const_cast<char**>(argv));
  app.parse(4, argv);
  ASSERT_TRUE(action);
  // Were the verb to go on to open the window, it would stop at once for want of a display.
  const QByteArray platform = qgetenv("QT_QPA_PLATFORM");
  qputenv("QT_QPA_PLATFORM", "offscreen");
  std::string err;
  int rc = -1;
  try {
    rc = action();
  } catch (const cli::UsageError& e) {
    err = e.what();
  }
  qputenv("QT_QPA_PLATFORM", platform);
  EXPECT_EQ(rc, -1) << "the verb went on to open the window";
  EXPECT_NE(err.find("windw(size=3)"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean window"), std::string::npos) << err;
}

// Item 7: at the default window size the head grid's "Colour by" row stays inside the view and
// offers every metric (output error, recall, no-op, long range...).
TEST(GuiState, HeadGridColourByOffersEveryMetricInsideTheView) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.variants = {"window(size=8)"};
  MainWindow w(o);
  show(w);
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  ASSERT_TRUE(wait_until([&] { return w.worker_idle(); }, 60000));
  w.set_view(render::ViewKind::HeadGrid);
  wait_settled(w, 30000, 3);
  save_shot(w, "item7_colour_by.png");
  const render::HeadGridDoc g = core::document(*w.analysis()).grid;
  ASSERT_GE(g.metrics.size(), 8u);
  std::vector<std::string> offered;
  const float right = float(w.view()->width());
  for (const auto& m : w.view()->canvas()->marks())
    if (m.kind == "grid.metric") {
      offered.push_back(m.text);
      EXPECT_LE(m.x1, right + 0.5f)
          << m.text << " runs off the view (" << m.x1 << " > " << right << ")";
      EXPECT_GE(m.x0, 0.f) << m.text;
    }
  EXPECT_EQ(offered, g.metrics) << "not every metric can be chosen";
}

// Item 7: switching to the vision model and back to a causal LM drops the dock's "needs a causal
// language model".
TEST(GuiState, InterventionsDockForgetsTheRefusalOnACausalModel) {
  if (!have_model("default-text") || !have_model("default-vision"))
    GTEST_SKIP() << "default models not found";
  MainWindow w(base_options());
  show(w);
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  QLabel* info = w.interventions_dock()->patch_info();
  w.model_dock()->set_model("default-vision");
  ASSERT_TRUE(wait_until([&] { return w.analysis() && w.analysis()->vision(); }, 60000));
  EXPECT_TRUE(info->text().contains("needs a causal language model")) << info->text().toStdString();
  w.model_dock()->set_model("default-text");
  ASSERT_TRUE(wait_until([&] { return w.analysis() && !w.analysis()->vision(); }, 60000));
  wait_settled(w, 30000, 2);
  EXPECT_FALSE(info->text().contains("needs a causal language model"))
      << info->text().toStdString();
}

// Item 7: clearing the text clears the token count, the old scan and the views (an empty-input
// state, not the last text's results).
TEST(GuiState, ClearingTheTextClearsTokensScanAndViews) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  GuiOptions o = base_options();
  o.text = "The keeper of the lighthouse wrote every evening in a small book.";
  o.text_file.clear();
  o.variants = {"window(size=8)"};
  MainWindow w(o);
  show(w);
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  InterventionsDock* dock = w.interventions_dock();
  ASSERT_TRUE(dock->start_scan());
  ASSERT_TRUE(wait_until([&] { return !dock->scanning(); }, 120000));
  ASSERT_FALSE(dock->scan().empty());
  ASSERT_TRUE(input_info(w).contains(" tokens")) << input_info(w).toStdString();
  w.input_dock()->editor()->clear();
  wait_until([] { return false; }, 1500);
  wait_until([&] { return w.worker_idle(); }, 30000);
  wait_until([] { return false; }, 300);
  save_shot(w, "item7_cleared_text.png");
  EXPECT_FALSE(input_info(w).contains(" tokens")) << input_info(w).toStdString();
  EXPECT_TRUE(dock->scan().empty()) << "the old text's scan is still shown";
  EXPECT_FALSE(w.analysis() && !w.analysis()->tokens.empty()) << "the views show the old text";
  ASSERT_TRUE(w.view()->canvas());
  EXPECT_TRUE(w.view()->canvas()->panel_rects().empty()) << "heatmaps of the old text are shown";
}

// Item 7: a saved session's view.query fits its input: a query row beyond a shortened text is
// reset (no `query: 185` for a 36-token text).
TEST(GuiState, ASavedSessionsQueryFitsItsInput) {
  if (!have_model("default-text")) GTEST_SKIP() << "default-text model not found";
  MainWindow w(base_options());  // the bundled sample: a few hundred tokens
  show(w);
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  const int long_n = w.analysis()->n_tokens();
  ASSERT_GT(long_n, 100);
  w.set_view(render::ViewKind::Tokens);
  w.view()->canvas()->settings().query = long_n - 2;  // a row near the end of the long text
  w.input_dock()->editor()->setPlainText("A short text of a few words.");
  ASSERT_TRUE(wait_until(
      [&] { return w.analysis() && w.analysis()->session.input.text.starts_with("A short"); },
      60000));
  ASSERT_TRUE(wait_settled(w, 60000)) << w.last_error().toStdString();
  const int n = w.analysis()->n_tokens();
  const std::string path = temp_path("query.attnscope.json");
  w.save_session_as(QString::fromStdString(path));
  const core::Session s = core::load_session(path);
  EXPECT_LT(s.view.query, n) << "the saved query row is past the " << n << "-token input";
  fs::remove(path);
}

}  // namespace
}  // namespace attn::gui::test

int main(int argc, char** argv) {
  return attn::gui::test::run_gui_tests(argc, argv, "test_gui_state", &attn::gui::test::g_instance);
}
