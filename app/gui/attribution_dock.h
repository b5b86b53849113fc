// Attribution dock: the session's attribution setup (core::SessionAttribution) as widgets, and
// its Run button. Methods come from the core's table (core::attribution_methods()); the target
// is a position (text; -1 the last token) and a token id or class (-1 the top prediction, or
// typed as text), with an optional foil; the baseline is one the input takes; integrated
// gradients' steps; whether the session's first variant replaces attention; and the faithfulness
// curves with their steps. Run computes on the shown analysis's model and input as a job
// (app/gui/job_runner.h, tag "attribution": one at a time, Stop cancels it through the core's
// cancel flag); the result becomes the Attribution view's document (doc(), finished()). Every
// failure - a gradient method with a variant that has no softmax, a target out of range - is
// shown under the button, never thrown.
#pragma once
#include <QDockWidget>
#include <memory>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/attribution_doc.h"
#include "app/core/session/session.h"
#include "app/gui/job_runner.h"
#include "render/document.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace attn::gui {

class AttributionDock : public QDockWidget {
  Q_OBJECT
 public:
  explicit AttributionDock(QWidget* parent = nullptr);
  ~AttributionDock() override;

  // The setup as the widgets hold it, and setting them (no signal).
  core::SessionAttribution setup() const;
  void set_setup(const core::SessionAttribution& s);
  // The analysis a run uses: bounds the position and the ids, offers the baselines its input
  // takes, names its first variant. A model-free input (tensors, synthetic) disables Run.
  void show_analysis(std::shared_ptr<const core::Analysis> a);
  // Runs the setup on the shown analysis (a job); done() follows, whether it finished, failed or
  // was stopped. Returns false when nothing can run (no model shown) or a run is going.
  bool run();
  // Stops the running job; its result is never shown.
  void stop();
  bool running() const { return running_; }

  // The last finished run (null before one; the figure export draws it), its document for the
  // view, the analysis and the setup it ran with.
  std::shared_ptr<const core::AttributionRun> result() const { return result_; }
  std::shared_ptr<const render::AttributionDoc> doc() const { return doc_; }
  std::shared_ptr<const core::Analysis> ran_on() const { return ran_on_; }
  const core::SessionAttribution& ran_setup() const { return ran_setup_; }
  // What the dock says under Run (the last run's summary or why it failed).
  QLabel* status_label() const { return status_; }
  QPushButton* run_button() const { return run_; }
  // The check box of a method id (null for an unknown id).
  QCheckBox* method_box(const std::string& id) const;

 signals:
  void edited();    // the setup changed: the session is saved; nothing reruns
  void finished();  // a run delivered a document: doc()
  void done();      // a run ended, however

 private:
  void set_running(bool on);
  void update_names();    // the target's and foil's names beside their ids
  void update_variant();  // the "first variant" check box's text
  void type_id(QLineEdit* edit, QSpinBox* spin);

  std::vector<std::pair<std::string, QCheckBox*>> methods_;
  QSpinBox *position_ = nullptr, *target_ = nullptr, *foil_ = nullptr;
  QLineEdit *target_text_ = nullptr, *foil_text_ = nullptr;
  QComboBox* baseline_ = nullptr;
  QSpinBox* ig_steps_ = nullptr;
  QComboBox* matmul_ = nullptr;
  QCheckBox* with_variant_ = nullptr;
  QCheckBox* faithfulness_ = nullptr;
  QSpinBox* steps_ = nullptr;
  QPushButton* run_ = nullptr;
  QLabel* status_ = nullptr;
  std::shared_ptr<const core::Analysis> shown_;
  std::shared_ptr<const core::AttributionRun> result_;
  std::shared_ptr<const render::AttributionDoc> doc_;
  std::shared_ptr<const core::Analysis> ran_on_;
  core::SessionAttribution ran_setup_;
  bool running_ = false;
  QString error_;  // the running job's failure ("" while none)
  // Below the GUI's priority, so frames keep coming while it computes; destroyed before the
  // child widgets: no job handler runs after that.
  JobRunner runner_{true};
};

}  // namespace attn::gui
