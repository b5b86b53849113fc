#include "app/gui/qk_dock.h"

#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace attn::gui {
namespace {

// What a finished job hands the GUI thread.
struct QkResult {
  std::shared_ptr<const core::QkRun> run;
  std::shared_ptr<const render::QkDoc> doc;
};

}  // namespace

QkDock::QkDock(QWidget* parent) : QDockWidget("Q/K map", parent) {
  setObjectName("QkDock");
  auto* w = new QWidget;
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(4, 4, 4, 4);
  auto* intro = new QLabel(
      "The selected head's queries and keys in one 2-D map (AttentionViz): a query lies near "
      "the keys it attends to.");
  intro->setWordWrap(true);
  lay->addWidget(intro);
  auto* form = new QFormLayout;
  method_ = new QComboBox;
  method_->addItem("PCA (follows the selected head)", "pca");
  method_->addItem("t-SNE (on Compute)", "tsne");
  method_->setToolTip(
      "PCA: the top two principal axes of queries and keys together (exact, quick; recomputed "
      "when the selected head or the input changes). t-SNE: neighbourhoods kept better, slower "
      "(seeded: the same map each time); it runs when Compute is pressed.");
  form->addRow("Projection", method_);
  lay->addLayout(form);
  compute_ = new QPushButton("Compute");
  compute_->setToolTip("Compute the map of the selected layer and head and show the Q/K map view");
  compute_->setEnabled(false);
  lay->addWidget(compute_);
  status_ = new QLabel("Select a head, then Compute.");
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::RichText);
  lay->addWidget(status_);
  lay->addStretch();
  setWidget(w);
  connect(method_, &QComboBox::currentIndexChanged, this, [this] { emit edited(); });
  connect(compute_, &QPushButton::clicked, this, [this] { compute(); });
}

QkDock::~QkDock() = default;

std::string QkDock::method() const {
  return method_->currentData().toString().toStdString();
}

void QkDock::set_method(const std::string& m) {
  method_->blockSignals(true);
  method_->setCurrentIndex(std::max(0, method_->findData(QString::fromStdString(m))));
  method_->blockSignals(false);
}

void QkDock::show_analysis(std::shared_ptr<const core::Analysis> a) {
  const bool model = a && a->model && a->info;
  shown_ = model ? a : nullptr;
  compute_->setEnabled(model);
  if (!model) {
    if (!running_)
      status_->setText(
          "The Q/K map needs a model: raw tensors and synthetic inputs have no model queries and "
          "keys.");
    return;
  }
  follow();
}

void QkDock::follow() {
  if (running_ || !shown_ || !ran_on_ || !result_ || result_->embedding.method != "pca") return;
  if (failed_on_ &&
      core::qk_stale(*failed_on_, failed_on_->session.layer, failed_on_->session.head, *shown_)
          .empty())
    return;  // it failed on this very map
  if (core::qk_stale(*ran_on_, ran_layer_, ran_head_, *shown_).empty()) return;
  start(false);
}

bool QkDock::compute() {
  return start(true);
}

void QkDock::set_running(bool on) {
  running_ = on;
  compute_->setEnabled(!on && shown_ != nullptr);
  compute_->setText(on ? "Computing..." : "Compute");
}

bool QkDock::start(bool requested) {
  if (running_ || !shown_) return false;
  const std::shared_ptr<const core::Analysis> a = shown_;
  const int layer = a->session.layer, head = a->session.head;
  const std::string m = requested ? method() : "pca";
  const uint64_t serial = ++serial_;
  error_.clear();
  set_running(true);
  status_->setText(QString("Computing the %1 map of layer %2 head %3...")
                       .arg(m == "tsne" ? "t-SNE" : "PCA")
                       .arg(layer)
                       .arg(head));
  runner_.submit(
      "qk",
      [a, layer, head, m, serial](JobContext& job) {
        auto r = std::make_shared<const core::QkRun>(
            core::run_qk(*a, layer, head, m, &job.cancel_flag()));
        return QkResult{r,
                        std::make_shared<const render::QkDoc>(core::qk_doc(*r, a.get(), serial))};
      },
      [this, a, layer, head, requested](const QkResult& r) {
        result_ = r.run;
        doc_ = r.doc;
        ran_on_ = a;
        ran_layer_ = layer;
        ran_head_ = head;
        status_->setText(QString("Layer %1 head %2: %3 points, rank fidelity %4, in %5 s.")
                             .arg(layer)
                             .arg(head)
                             .arg(r.doc->points.size())
                             .arg(r.doc->rank_fidelity, 0, 'f', 3)
                             .arg(r.run->seconds, 0, 'f', 2));
        emit finished(requested);
      },
      {.failed =
           [this, a](const QString& msg) {
             error_ = msg;
             failed_on_ = a;
           },
       .progress = {},
       .ended =
           [this](JobEnd e) {
             set_running(false);
             if (!error_.isEmpty())
               status_->setText("<b>Cannot map:</b> " + error_.toHtmlEscaped());
             else if (e == JobEnd::Cancelled)
               status_->setText("Stopped.");
             emit done();
             // The selection moved on while it ran: follow it (PCA only, and not after a failure).
             if (error_.isEmpty() && e == JobEnd::Done) follow();
           }});
  return true;
}

void QkDock::stop() {
  runner_.cancel("qk");
}

}  // namespace attn::gui
