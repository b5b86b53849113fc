#include "app/gui/attribution_dock.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <exception>

#include "app/core/analysis/attribution_doc.h"
#include "app/core/attribution/attribution.h"

namespace attn::gui {
namespace {

QString html(const std::string& s) {
  return QString::fromStdString(s).toHtmlEscaped();
}

// What a finished job hands the GUI thread.
struct RunResult {
  std::shared_ptr<const core::AttributionRun> run;
  std::shared_ptr<const render::AttributionDoc> doc;
};

// The text of a target name without the quotes around a token ("' the'" -> " the").
QString bare(const std::string& name) {
  if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'')
    return QString::fromStdString(name.substr(1, name.size() - 2));
  return QString::fromStdString(name);
}

QSpinBox* id_spin(const QString& special, const QString& tip) {
  auto* s = new QSpinBox;
  s->setRange(-1, (1 << 24));
  s->setSpecialValueText(special);
  s->setValue(-1);
  s->setKeyboardTracking(false);
  s->setToolTip(tip);
  return s;
}

}  // namespace

AttributionDock::AttributionDock(QWidget* parent) : QDockWidget("Attribution", parent) {
  setObjectName("AttributionDock");
  auto* w = new QWidget;
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(4, 4, 4, 4);

  auto* box = new QGroupBox("Methods");
  auto* ml = new QVBoxLayout(box);
  ml->setContentsMargins(6, 4, 6, 4);
  ml->setSpacing(2);
  for (const core::AttributionMethod& m : core::attribution_methods()) {
    auto* c = new QCheckBox(QString::fromStdString(m.title));
    QString tip = "<b>" + html(m.id) + "</b>: " + html(m.definition);
    if (m.source != "-") tip += "<br><i>" + html(m.source) + "</i>";
    if (m.gradient)
      tip +=
          "<br>A gradient method: with a variant, it needs a softmax over the kept keys (no "
          "other normaliser, approximation, temperature or soft-capping).";
    c->setToolTip(tip);
    ml->addWidget(c);
    methods_.push_back({m.id, c});
    connect(c, &QCheckBox::toggled, this, [this] { emit edited(); });
  }
  auto* pick = new QHBoxLayout;
  auto* all = new QPushButton("All");
  auto* none = new QPushButton("None");
  all->setToolTip("Check every method");
  none->setToolTip("Clear every method");
  pick->addWidget(all);
  pick->addWidget(none);
  pick->addStretch();
  ml->addLayout(pick);
  lay->addWidget(box);
  auto set_all = [this](bool on) {
    for (auto& [id, c] : methods_) {
      c->blockSignals(true);
      c->setChecked(on);
      c->blockSignals(false);
    }
    emit edited();
  };
  connect(all, &QPushButton::clicked, this, [set_all] { set_all(true); });
  connect(none, &QPushButton::clicked, this, [set_all] { set_all(false); });

  auto* form = new QFormLayout;
  position_ = new QSpinBox;
  position_->setRange(-1, 1 << 20);
  position_->setSpecialValueText("last token");
  position_->setValue(-1);
  position_->setKeyboardTracking(false);
  position_->setToolTip(
      "Text: the position whose logits hold the target (a causal model predicts the token after "
      "it). Tokens after it cannot matter to the target and are greyed.");
  target_ = id_spin("top prediction",
                    "The token id or class attributed (the model's top "
                    "prediction at the position by default)");
  foil_ = id_spin("none",
                  "Optional: attribute logit(target) - logit(foil) instead of the "
                  "target's logit");
  target_text_ = new QLineEdit;
  target_text_->setPlaceholderText("or type it");
  target_text_->setToolTip(
      "The target as text: one token (e.g. ' the', with its space) or a "
      "class name; Enter sets the id");
  foil_text_ = new QLineEdit;
  foil_text_->setPlaceholderText("or type it");
  foil_text_->setToolTip(target_text_->toolTip());
  auto id_row = [](QSpinBox* spin, QLineEdit* edit) {
    auto* row = new QHBoxLayout;
    row->addWidget(spin, 1);
    row->addWidget(edit, 1);
    return row;
  };
  baseline_ = new QComboBox;
  baseline_->setToolTip(
      "What replaces a removed unit (occlusion, the curves) and where integrated gradients "
      "start: zero embedding rows or pixels; a token's embedding row (the tokenizer's mask, pad "
      "or unk token); an image's mean pixel per channel");
  for (const char* b : {"zero", "token", "mean"}) baseline_->addItem(b, b);
  ig_steps_ = new QSpinBox;
  ig_steps_->setRange(1, 4096);
  ig_steps_->setValue(32);
  ig_steps_->setKeyboardTracking(false);
  ig_steps_->setToolTip("Integrated gradients: midpoint Riemann steps from the baseline");
  form->addRow("Position", position_);
  form->addRow("Target", id_row(target_, target_text_));
  form->addRow("Foil", id_row(foil_, foil_text_));
  form->addRow("Baseline", baseline_);
  matmul_ = new QComboBox;
  matmul_->addItem("f32", "f32");
  matmul_->addItem("bf16 (AMX or AVX512-BF16 where present)", "bf16");
  matmul_->setToolTip(
      "Precision of every pass's matrix products: f32, or bf16 (inputs and weights rounded to "
      "bf16, sums in f32, as torch's 'medium' float32 matmul precision): faster on CPUs with "
      "AMX (several times) or AVX512-BF16 (about twice), for long integrated-gradients runs");
  form->addRow("IG steps", ig_steps_);
  form->addRow("Matmuls", matmul_);
  lay->addLayout(form);
  with_variant_ = new QCheckBox("With the first variant");
  with_variant_->setToolTip(
      "Run the model with the session's first variant in place of dense attention (its layers "
      "and heads); gradient methods need a softmax over the kept keys");
  lay->addWidget(with_variant_);
  auto* curves = new QHBoxLayout;
  faithfulness_ = new QCheckBox("Faithfulness curves");
  faithfulness_->setToolTip(
      "Deletion and insertion curves: the target's probability as each method's top units are "
      "removed or revealed on the baseline, against random orders (one forward pass a step)");
  steps_ = new QSpinBox;
  steps_->setRange(1, 1000);
  steps_->setValue(10);
  steps_->setSuffix(" steps");
  steps_->setKeyboardTracking(false);
  steps_->setToolTip("Steps of the curves");
  curves->addWidget(faithfulness_);
  curves->addWidget(steps_);
  curves->addStretch();
  lay->addLayout(curves);
  run_ = new QPushButton("Run");
  run_->setToolTip("Attribute the target to the input with every checked method");
  lay->addWidget(run_);
  status_ = new QLabel("Check methods, then Run.");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lay->addWidget(status_);
  lay->addStretch();
  setWidget(w);

  for (QSpinBox* s : {position_, target_, foil_, ig_steps_, steps_})
    connect(s, &QSpinBox::valueChanged, this, [this] { emit edited(); });
  connect(target_, &QSpinBox::valueChanged, this, [this] { update_names(); });
  connect(foil_, &QSpinBox::valueChanged, this, [this] { update_names(); });
  for (QComboBox* c : {baseline_, matmul_})
    connect(c, &QComboBox::currentIndexChanged, this, [this] { emit edited(); });
  for (QCheckBox* c : {with_variant_, faithfulness_})
    connect(c, &QCheckBox::toggled, this, [this] { emit edited(); });
  connect(faithfulness_, &QCheckBox::toggled, steps_, &QWidget::setEnabled);
  steps_->setEnabled(false);
  connect(target_text_, &QLineEdit::editingFinished, this,
          [this] { type_id(target_text_, target_); });
  connect(foil_text_, &QLineEdit::editingFinished, this, [this] { type_id(foil_text_, foil_); });
  connect(run_, &QPushButton::clicked, this, [this] { running_ ? stop() : void(run()); });
  run_->setEnabled(false);
}

// The runner cancels a running job and never waits for it long (JobRunner::kStopWaitMs).
AttributionDock::~AttributionDock() = default;

QCheckBox* AttributionDock::method_box(const std::string& id) const {
  for (const auto& [m, c] : methods_)
    if (m == id) return c;
  return nullptr;
}

core::SessionAttribution AttributionDock::setup() const {
  core::SessionAttribution s;
  for (const auto& [id, c] : methods_)
    if (c->isChecked()) s.methods.push_back(id);
  s.position = position_->value();
  s.target = target_->value();
  s.foil = foil_->value();
  s.baseline = baseline_->currentData().toString().toStdString();
  s.ig_steps = ig_steps_->value();
  s.matmul = matmul_->currentData().toString().toStdString();
  s.with_variant = with_variant_->isChecked();
  s.faithfulness = faithfulness_->isChecked();
  s.steps = steps_->value();
  return s;
}

void AttributionDock::set_setup(const core::SessionAttribution& s) {
  const QList<QWidget*> all = {position_,     target_,      foil_,     baseline_,
                               ig_steps_,     matmul_,      steps_,    with_variant_,
                               faithfulness_, target_text_, foil_text_};
  for (QWidget* x : all) x->blockSignals(true);
  for (auto& [id, c] : methods_) {
    c->blockSignals(true);
    c->setChecked(std::find(s.methods.begin(), s.methods.end(), id) != s.methods.end());
    c->blockSignals(false);
  }
  position_->setValue(s.position);
  target_->setValue(s.target);
  foil_->setValue(s.foil);
  const QString b = QString::fromStdString(s.baseline);
  if (baseline_->findData(b) < 0) baseline_->addItem(b, b);  // "token:ID"
  baseline_->setCurrentIndex(baseline_->findData(b));
  ig_steps_->setValue(s.ig_steps);
  matmul_->setCurrentIndex(std::max(0, matmul_->findData(QString::fromStdString(s.matmul))));
  with_variant_->setChecked(s.with_variant);
  faithfulness_->setChecked(s.faithfulness);
  steps_->setValue(s.steps);
  steps_->setEnabled(s.faithfulness);
  for (QWidget* x : all) x->blockSignals(false);
  update_names();
}

void AttributionDock::show_analysis(std::shared_ptr<const core::Analysis> a) {
  const bool model = a && a->model && a->info;
  shown_ = model ? a : nullptr;
  run_->setEnabled(running_ || model);
  if (!model) {
    if (!running_)
      status_->setText(
          "Attribution needs a model: raw tensors and synthetic inputs have no target to "
          "attribute.");
    return;
  }
  const bool vision = a->info->vision;
  const int n = core::attribution_target_count(*a);
  const QList<QWidget*> quiet = {position_, target_, foil_, baseline_};
  for (QWidget* x : quiet) x->blockSignals(true);
  position_->setEnabled(!vision);
  position_->setMaximum(std::max(0, int(a->input.ids.size()) - 1));
  target_->setMaximum(std::max(0, n - 1));
  foil_->setMaximum(std::max(0, n - 1));
  // The baselines this input takes; one it does not ("mean" for a text) gives way to "zero".
  const QString current = baseline_->currentData().toString();
  baseline_->clear();
  for (const std::string& b : core::attribution_baselines(*a))
    baseline_->addItem(QString::fromStdString(b), QString::fromStdString(b));
  if (!vision && current.startsWith("token:")) baseline_->addItem(current, current);
  baseline_->setCurrentIndex(std::max(0, baseline_->findData(current)));
  for (QWidget* x : quiet) x->blockSignals(false);
  target_text_->setPlaceholderText(vision ? "or a class name" : "or type a token");
  foil_text_->setPlaceholderText(target_text_->placeholderText());
  with_variant_->setText(
      a->panels.size() > 1 ? "With the first variant: " + QString::fromStdString(a->panels[1].spec)
                           : QString("With the first variant (the session has none)"));
  update_names();
}

void AttributionDock::update_names() {
  if (!shown_) return;
  for (auto [spin, edit] : {std::pair{target_, target_text_}, std::pair{foil_, foil_text_}}) {
    if (edit->hasFocus()) continue;
    edit->blockSignals(true);
    edit->setText(spin->value() >= 0 ? bare(core::attribution_target_name(*shown_, spin->value()))
                                     : QString());
    edit->blockSignals(false);
  }
}

void AttributionDock::type_id(QLineEdit* edit, QSpinBox* spin) {
  if (!shown_) return;
  const QString text = edit->text();
  if (text.isEmpty()) {
    spin->setValue(-1);
    return;
  }
  try {
    spin->setValue(core::attribution_target_id(*shown_, text.toStdString()));
    update_names();
  } catch (const std::exception& e) {
    status_->setText("<b>Cannot use '" + text.toHtmlEscaped() + "':</b> " + html(e.what()));
  }
}

void AttributionDock::set_running(bool on) {
  running_ = on;
  run_->setText(on ? "Stop" : "Run");
  run_->setEnabled(on || shown_ != nullptr);
}

bool AttributionDock::run() {
  if (running_ || !shown_) return false;
  const core::SessionAttribution s = setup();
  const std::shared_ptr<const core::Analysis> a = shown_;
  error_.clear();
  set_running(true);
  status_->setText(QString("Running %1 method%2...")
                       .arg(s.methods.size())
                       .arg(s.methods.size() == 1 ? "" : "s"));
  runner_.submit(
      "attribution",
      [a, s](JobContext& ctx) {
        auto r = std::make_shared<const core::AttributionRun>(
            core::run_attribution(*a, s, &ctx.cancel_flag()));
        return RunResult{
            r, std::make_shared<const render::AttributionDoc>(core::attribution_doc(*r, a.get()))};
      },
      [this, a, s](const RunResult& r) {
        result_ = r.run;
        doc_ = r.doc;
        ran_on_ = a;
        ran_setup_ = s;
        const render::AttributionDoc& d = *r.doc;
        status_->setText(QString("%1 method%2 over %3 %4 in %5 s. Target %6.")
                             .arg(d.methods.size())
                             .arg(d.methods.size() == 1 ? "" : "s")
                             .arg(d.units())
                             .arg(d.image ? "patches" : "tokens")
                             .arg(r.run->seconds, 0, 'f', 2)
                             .arg(html(d.target_label)));
        emit finished();
      },
      {.failed = [this](const QString& m) { error_ = m; },
       .progress = [this](const QString& t) { status_->setText(t.toHtmlEscaped()); },
       .ended =
           [this](JobEnd e) {
             set_running(false);
             if (!error_.isEmpty())
               status_->setText("<b>Cannot attribute:</b> " + error_.toHtmlEscaped());
             else if (e == JobEnd::Cancelled)
               status_->setText("Stopped.");
             emit done();
           }});
  return true;
}

void AttributionDock::stop() {
  runner_.cancel("attribution");
}

}  // namespace attn::gui
