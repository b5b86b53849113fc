#include "app/gui/decode_steps.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QResizeEvent>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "app/core/analysis/analysis.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::gui {

DecodeStepsView::DecodeStepsView(std::string model_id, std::string text, QWidget* parent)
    : QWidget(parent), model_id_(std::move(model_id)), text_(std::move(text)) {
  policy_ = new QComboBox;
  policy_->setMinimumContentsLength(28);
  policy_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  steps_ = new QSpinBox;
  steps_->setRange(1, core::kMaxTraceSteps);
  steps_->setValue(96);
  steps_->setToolTip("One-token steps traced");
  prefill_ = new QSpinBox;
  prefill_->setRange(0, 1 << 20);
  prefill_->setValue(32);
  prefill_->setToolTip("Tokens read in one pass before the first step");
  layer_ = new QSpinBox;
  head_ = new QSpinBox;
  layer_->setRange(0, 1023);
  head_->setRange(0, 1023);
  head_->setToolTip("Query head");
  generate_ = new QCheckBox("generate after the prefill");
  generate_->setToolTip(
      "Sample each next token (temperature 0.8, seed 0) instead of reading the text");
  run_ = new QPushButton("Trace");
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel("policy"));
  controls->addWidget(policy_, 1);
  controls->addWidget(new QLabel("prefill"));
  controls->addWidget(prefill_);
  controls->addWidget(new QLabel("steps"));
  controls->addWidget(steps_);
  controls->addWidget(generate_);
  controls->addWidget(new QLabel("layer"));
  controls->addWidget(layer_);
  controls->addWidget(new QLabel("head"));
  controls->addWidget(head_);
  controls->addWidget(run_);

  slider_ = new QSlider(Qt::Horizontal);
  slider_->setEnabled(false);
  slider_->setToolTip("Step (arrow keys step one token)");
  status_ = new QLabel("Trace a policy, then move the slider through its steps.");
  status_->setMinimumWidth(260);
  auto* stepper = new QHBoxLayout;
  stepper->addWidget(new QLabel("step"));
  stepper->addWidget(slider_, 1);
  stepper->addWidget(status_);

  view_ = new QLabel;
  view_->setAlignment(Qt::AlignCenter);
  view_->setMinimumSize(480, 300);
  view_->setBackgroundRole(QPalette::Base);
  view_->setAutoFillBackground(true);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addLayout(stepper);
  layout->addWidget(view_, 1);
  connect(run_, &QPushButton::clicked, this, &DecodeStepsView::trace);
  connect(slider_, &QSlider::valueChanged, this, [this] { redraw(); });
  connect(layer_, &QSpinBox::valueChanged, this, [this] { redraw(); });
  connect(head_, &QSpinBox::valueChanged, this, [this] { redraw(); });
}

// The runner cancels a running trace and never waits for it long (JobRunner::kStopWaitMs).
DecodeStepsView::~DecodeStepsView() = default;

void DecodeStepsView::set_policies(const std::vector<std::string>& specs) {
  const QString current = policy_->currentText();
  policy_->clear();
  for (const std::string& s : specs) policy_->addItem(QString::fromStdString(s));
  const int i = policy_->findText(current);
  policy_->setCurrentIndex(i >= 0 ? i : specs.size() > 2 ? 2 : 0);
}

void DecodeStepsView::set_policy(int index) {
  policy_->setCurrentIndex(index);
}
void DecodeStepsView::set_steps(int n) {
  steps_->setValue(n);
}
void DecodeStepsView::set_generate(bool on) {
  generate_->setChecked(on);
}
void DecodeStepsView::set_layer_head(int layer, int head) {
  layer_->setValue(layer);
  head_->setValue(head);
}
void DecodeStepsView::set_step(int step) {
  slider_->setValue(step);
}
int DecodeStepsView::step() const {
  return slider_->value();
}

void DecodeStepsView::trace() {
  if (running_) return;
  core::TraceOptions o;
  o.policy = policy_->currentText().toStdString();
  o.steps = steps_->value();
  o.generate = generate_->isChecked();
  o.sampling.temperature = 0.8;
  o.sampling.seed = 0;
  const int prefill = prefill_->value();
  running_ = true;
  run_->setEnabled(false);
  error_.clear();
  status_->setText("starting...");
  JobHooks hooks;
  hooks.progress = [this](const QString& text) { status_->setText(text); };
  hooks.failed = [this](const QString& error) {
    error_ = error;
    status_->setText("Stopped: " + error);
  };
  hooks.ended = [this](JobEnd) {
    running_ = false;
    run_->setEnabled(true);
  };
  runner_.submit(
      "trace",
      [o, prefill, model_id = model_id_, text = text_](JobContext& ctx) mutable {
        o.progress = [&ctx, total = o.steps](int done) {
          if (done % 8 == 0 || done == total)
            ctx.progress(QString("tracing: step %1 of %2").arg(done).arg(total));
          return !ctx.cancelled();
        };
        require(!o.policy.empty(), ErrorCode::InvalidArgument, "no policy: run the lab first");
        auto model = core::cached_model(model_id);
        std::vector<int32_t> ids = core::tokenize_stream(*model, text);
        if (model->config().bos_token_id)
          ids.insert(ids.begin(), int32_t(*model->config().bos_token_id));
        // Reading the text: the prefill, then the steps that fit. Generating: the prefill and
        // one more given token, then samples.
        o.prefill = std::min(prefill, int(ids.size()) - 1);
        if (o.generate) ids.resize(size_t(o.prefill) + 1);
        return std::make_shared<core::DecodeTrace>(core::trace_decode(*model, model_id, ids, o));
      },
      [this](std::shared_ptr<core::DecodeTrace> t) { finished(std::move(t)); }, std::move(hooks));
}

void DecodeStepsView::finished(std::shared_ptr<core::DecodeTrace> t) {
  trace_ = std::move(t);
  layer_->setMaximum(trace_->n_layers - 1);
  head_->setMaximum(trace_->n_heads - 1);
  slider_->setRange(0, int(trace_->steps.size()) - 1);
  slider_->setEnabled(true);
  slider_->setValue(0);
  redraw();
}

core::FigureData DecodeStepsView::figure() const {
  require(trace_ != nullptr, ErrorCode::InvalidArgument, "no trace yet");
  return core::decode_figure(*trace_, layer_->value(), head_->value(), slider_->value());
}

void DecodeStepsView::redraw() {
  if (!trace_ || trace_->steps.empty()) return;
  const int s = std::clamp(slider_->value(), 0, int(trace_->steps.size()) - 1);
  const core::TraceStep& st = trace_->steps[size_t(s)];
  try {
    const core::FigureData d = figure();
    fig::ensure_gui_app();
    const int w = std::max(600, view_->width());
    // A page the size of the view: the figure fills it, its text at screen size.
    image_ = fig::render_figure_image(d, {w, std::max(360, view_->height()), 96});
    view_->setPixmap(QPixmap::fromImage(image_).scaled(view_->size(), Qt::KeepAspectRatio,
                                                       Qt::SmoothTransformation));
    status_->setText(QString("step %1 of %2 \u00b7 position %3 \u00b7 %4 cache entries")
                         .arg(s)
                         .arg(trace_->steps.size())
                         .arg(st.position)
                         .arg(st.entries));
  } catch (const std::exception& e) {
    error_ = QString::fromStdString(e.what());
    status_->setText(error_);
  }
}

void DecodeStepsView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  redraw();
}

}  // namespace attn::gui
