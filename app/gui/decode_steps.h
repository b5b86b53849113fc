// The decode lab's step-through view: traces the session's text (or a generation from its first
// tokens) one token at a time under a chosen KV-cache policy (app/core/decode/decode_trace.h), then
// a slider walks the steps: each shows the decode figure, the query's attention over what the cache
// holds beside what was evicted, for a chosen layer and query head. The trace runs as a job
// (app/gui/job_runner.h); destroying the view cancels it.
#pragma once
#include <QImage>
#include <QWidget>
#include <memory>
#include <string>
#include <vector>

#include "app/core/decode/decode_trace.h"
#include "app/gui/job_runner.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;

namespace attn::gui {

class DecodeStepsView : public QWidget {
  Q_OBJECT
 public:
  DecodeStepsView(std::string model_id, std::string text, QWidget* parent = nullptr);
  ~DecodeStepsView() override;

  // The policies offered (the lab's list); keeps the current choice when it is still there.
  void set_policies(const std::vector<std::string>& specs);
  void set_policy(int index);
  void set_steps(int n);
  void set_generate(bool on);
  void set_layer_head(int layer, int head);
  void trace();  // as the button does
  void set_step(int step);

  bool running() const { return running_; }
  const core::DecodeTrace* result() const { return trace_.get(); }
  int step() const;
  // The decode figure of the step, layer and head shown (needs a trace).
  core::FigureData figure() const;
  QImage image() const { return image_; }
  QString error() const { return error_; }

 private:
  void finished(std::shared_ptr<core::DecodeTrace> t);
  void redraw();
  void resizeEvent(QResizeEvent* e) override;

  std::string model_id_, text_;
  QComboBox* policy_ = nullptr;
  QSpinBox *steps_ = nullptr, *prefill_ = nullptr, *layer_ = nullptr, *head_ = nullptr;
  QCheckBox* generate_ = nullptr;
  QPushButton* run_ = nullptr;
  QSlider* slider_ = nullptr;
  QLabel *status_ = nullptr, *view_ = nullptr;
  QImage image_;
  QString error_;
  std::shared_ptr<core::DecodeTrace> trace_;
  bool running_ = false;
  JobRunner runner_;  // destroyed before the child widgets: no job handler runs after that
};

}  // namespace attn::gui
