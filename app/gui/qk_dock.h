// Q/K map dock: the projection (PCA, or t-SNE) and a Compute button for the Q/K map view: the
// query-key joint embedding (app/core/attribution/qk_embedding.h) of the selected head on the
// shown analysis's model and input. Compute runs as a job (app/gui/job_runner.h, tag "qk");
// the result becomes the view's document (doc(), finished()). A PCA map follows the selection:
// once one was computed, a new head, input or model recomputes it (one forward pass); a t-SNE
// map waits for the button and is marked out of date meanwhile. Failures are shown under the
// button, never thrown.
#pragma once
#include <QDockWidget>
#include <memory>
#include <string>

#include "app/core/analysis/analysis.h"
#include "app/core/analysis/qk_doc.h"
#include "app/gui/job_runner.h"
#include "render/document.h"

class QComboBox;
class QLabel;
class QPushButton;

namespace attn::gui {

class QkDock : public QDockWidget {
  Q_OBJECT
 public:
  explicit QkDock(QWidget* parent = nullptr);
  ~QkDock() override;

  // The projection the combo holds ("pca" | "tsne"), and setting it (no signal).
  std::string method() const;
  void set_method(const std::string& m);
  // The analysis a map uses (its model, input and selected head). A model-free input disables
  // Compute. A PCA map already shown is recomputed when it no longer matches.
  void show_analysis(std::shared_ptr<const core::Analysis> a);
  // Computes the map of the shown analysis's selected head (a job); done() follows. Returns
  // false when nothing can run (no model shown).
  bool compute();
  void stop();
  bool running() const { return running_; }

  // The last map (null before one), its document, and the analysis, layer and head it ran on.
  std::shared_ptr<const core::QkRun> result() const { return result_; }
  std::shared_ptr<const render::QkDoc> doc() const { return doc_; }
  std::shared_ptr<const core::Analysis> ran_on() const { return ran_on_; }
  int ran_layer() const { return ran_layer_; }
  int ran_head() const { return ran_head_; }
  QLabel* status_label() const { return status_; }
  QPushButton* compute_button() const { return compute_; }
  QComboBox* method_box() const { return method_; }

 signals:
  void edited();                  // the projection changed
  void finished(bool requested);  // a map arrived: doc(); `requested` by Compute (not followed)
  void done();                    // a job ended, however

 private:
  bool start(bool requested);
  // Recomputes a PCA map that no longer matches the shown analysis.
  void follow();
  void set_running(bool on);

  QComboBox* method_ = nullptr;
  QPushButton* compute_ = nullptr;
  QLabel* status_ = nullptr;
  std::shared_ptr<const core::Analysis> shown_;
  std::shared_ptr<const core::QkRun> result_;
  std::shared_ptr<const render::QkDoc> doc_;
  std::shared_ptr<const core::Analysis> ran_on_;
  int ran_layer_ = 0, ran_head_ = 0;
  uint64_t serial_ = 0;
  bool running_ = false;
  QString error_;
  // The analysis the last map failed on: not followed again (that would fail again).
  std::shared_ptr<const core::Analysis> failed_on_;
  // Destroyed before the child widgets: no job handler runs after that.
  JobRunner runner_{true};
};

}  // namespace attn::gui
