// The decode lab: streams the session's text through its model token by token under several
// KV-cache policies (app/core/decode/stream.h) and shows the two figures of the run, perplexity
// against tokens streamed beside quality against cache memory, and the cache timeline of a
// chosen layer and KV head, with a summary table and figure export; a step-through tab traces
// one policy token by token (app/gui/decode_steps.h). The stream runs as a job
// (app/gui/job_runner.h); closing the dialog cancels it.
#pragma once
#include <QDialog>
#include <QImage>
#include <memory>
#include <string>
#include <vector>

#include "app/core/decode/stream.h"
#include "app/gui/job_runner.h"

class QCheckBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTabWidget;

namespace attn::gui {

class DecodeStepsView;

class DecodeDialog : public QDialog {
  Q_OBJECT
 public:
  // `model_id`: the session's model (an embedded name or a folder); `text`: what to stream.
  DecodeDialog(std::string model_id, std::string text, QWidget* parent = nullptr);
  ~DecodeDialog() override;

  // For scripted use and tests: the policies (one spec per line), then run() as the button does.
  void set_policies(const QString& lines);
  void set_max_tokens(int n);
  void run();
  bool running() const { return running_; }
  // The last finished run (null before one) and its error ("" when it succeeded).
  const core::StreamResult* result() const { return result_.get(); }
  QString error() const;
  int table_rows() const;
  QImage figure_image(int tab) const;                          // 0: perplexity, 1: cache timeline
  DecodeStepsView* steps_view() const { return steps_view_; }  // the "Step through" tab

 private:
  void finished(std::shared_ptr<core::StreamResult> r);
  void show_figures();
  void export_current();
  void closeEvent(QCloseEvent* e) override;

  std::string model_id_, text_;
  QPlainTextEdit* policies_ = nullptr;
  QSpinBox *max_tokens_ = nullptr, *prefill_ = nullptr, *layer_ = nullptr, *head_ = nullptr;
  QCheckBox* bos_ = nullptr;
  QPushButton *run_ = nullptr, *export_ = nullptr;
  QLabel* status_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QLabel *stream_view_ = nullptr, *cache_view_ = nullptr;
  QTableWidget* table_ = nullptr;
  DecodeStepsView* steps_view_ = nullptr;
  QImage images_[2];
  std::shared_ptr<core::StreamResult> result_;
  bool running_ = false;
  JobRunner runner_;  // destroyed before the child widgets: no job handler runs after that
};

}  // namespace attn::gui
