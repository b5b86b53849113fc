#include "app/gui/decode_dialog.h"

#include <QCheckBox>
#include <QCloseEvent>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/core/analysis/analysis.h"
#include "app/core/export/figure_data.h"
#include "app/figures/figure.h"
#include "app/gui/decode_steps.h"
#include "compute/error.h"
#include "compute/kv/kv_policy.h"

namespace attn::gui {

namespace {

constexpr const char* kDefaultPolicies =
    "kv_full\n"
    "kv_recent(window=64)\n"
    "kv_streaming(sinks=4,window=60)\n"
    "kv_h2o(budget=64,recent=32)\n"
    "kv_tova(budget=64)\n";

QLabel* figure_label() {
  auto* l = new QLabel;
  l->setAlignment(Qt::AlignCenter);
  l->setMinimumSize(480, 300);
  l->setBackgroundRole(QPalette::Base);
  return l;
}

}  // namespace

DecodeDialog::DecodeDialog(std::string model_id, std::string text, QWidget* parent)
    : QDialog(parent), model_id_(std::move(model_id)), text_(std::move(text)) {
  setWindowTitle("Decode lab: KV-cache policies");
  auto* form = new QFormLayout;
  policies_ = new QPlainTextEdit(kDefaultPolicies);
  std::string pieces;  // from the policy table, so the hint names every piece there is
  for (const VariantInfo& info : kv_pieces()) pieces += (pieces.empty() ? "" : ", ") + info.id;
  policies_->setToolTip(QString::fromStdString(
      "One KV-cache policy per line, an eviction and a precision piece joined by '+'. Pieces: " +
      pieces + " (attnscope variants --kv lists their parameters)"));
  policies_->setMinimumHeight(90);
  policies_->setMaximumHeight(130);
  form->addRow("Policies", policies_);
  max_tokens_ = new QSpinBox;
  max_tokens_->setRange(2, 1 << 20);
  max_tokens_->setValue(1000);
  prefill_ = new QSpinBox;
  prefill_->setRange(1, 1 << 20);
  layer_ = new QSpinBox;
  head_ = new QSpinBox;
  layer_->setRange(0, 1023);
  head_->setRange(0, 1023);
  bos_ = new QCheckBox("start with the model's beginning-of-text token");
  bos_->setChecked(true);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel("tokens"));
  row->addWidget(max_tokens_);
  row->addWidget(new QLabel("prefill"));
  row->addWidget(prefill_);
  row->addWidget(new QLabel("timeline layer"));
  row->addWidget(layer_);
  row->addWidget(new QLabel("KV head"));
  row->addWidget(head_);
  row->addStretch();
  form->addRow("Stream", row);
  form->addRow("", bos_);

  run_ = new QPushButton("Run");
  export_ = new QPushButton("Export figure...");
  export_->setEnabled(false);
  status_ = new QLabel("Streams the session's text token by token under each policy.");
  status_->setWordWrap(true);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(run_);
  buttons->addWidget(export_);
  buttons->addWidget(status_, 1);

  tabs_ = new QTabWidget;
  stream_view_ = figure_label();
  cache_view_ = figure_label();
  table_ = new QTableWidget(0, 5);
  table_->setHorizontalHeaderLabels(
      {"policy", "perplexity", "last 1000 tokens", "cache at the end", "ms / step"});
  table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  tabs_->addTab(stream_view_, "Perplexity");
  tabs_->addTab(cache_view_, "Cache timeline");
  tabs_->addTab(table_, "Summary");
  steps_view_ = new DecodeStepsView(model_id_, text_);
  tabs_->addTab(steps_view_, "Step through");
  // The step-through view offers the lab's policies.
  const auto offer = [this] {
    std::vector<std::string> specs;
    for (const QString& line : policies_->toPlainText().split('\n', Qt::SkipEmptyParts))
      if (!line.trimmed().isEmpty()) specs.push_back(line.trimmed().toStdString());
    steps_view_->set_policies(specs);
  };
  offer();
  connect(policies_, &QPlainTextEdit::textChanged, this, offer);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addLayout(buttons);
  layout->addWidget(tabs_, 1);
  resize(1100, 820);
  connect(run_, &QPushButton::clicked, this, &DecodeDialog::run);
  connect(export_, &QPushButton::clicked, this, &DecodeDialog::export_current);
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    export_->setEnabled(tabs_->currentWidget() == steps_view_ || result_ != nullptr);
    show_figures();
  });
}

// The runner cancels a running stream and never waits for it long (JobRunner::kStopWaitMs).
DecodeDialog::~DecodeDialog() = default;

void DecodeDialog::set_policies(const QString& lines) {
  policies_->setPlainText(lines);
}
void DecodeDialog::set_max_tokens(int n) {
  max_tokens_->setValue(n);
}

QString DecodeDialog::error() const {
  return status_->property("error").toString();
}

int DecodeDialog::table_rows() const {
  return table_->rowCount();
}

QImage DecodeDialog::figure_image(int tab) const {
  return images_[tab == 0 ? 0 : 1];
}

void DecodeDialog::run() {
  if (running_) return;
  std::vector<std::string> specs;
  for (const QString& line : policies_->toPlainText().split('\n', Qt::SkipEmptyParts))
    if (!line.trimmed().isEmpty()) specs.push_back(line.trimmed().toStdString());
  core::StreamOptions o;
  o.policies = specs;
  o.prefill = prefill_->value();
  o.max_tokens = max_tokens_->value();
  o.record_cache = true;
  const bool bos = bos_->isChecked();
  const int layer = layer_->value(), head = head_->value();
  running_ = true;
  run_->setEnabled(false);
  status_->setProperty("error", QString());
  status_->setText("starting...");
  JobHooks hooks;
  hooks.progress = [this](const QString& text) { status_->setText(text); };
  hooks.failed = [this](const QString& error) {
    status_->setProperty("error", error);
    status_->setText("Stopped: " + error);
  };
  hooks.ended = [this](JobEnd) {
    running_ = false;
    run_->setEnabled(true);
  };
  runner_.submit(
      "stream",
      [o, bos, layer, head, model_id = model_id_, text = text_](JobContext& ctx) mutable {
        o.progress = [&ctx](int policy, int tokens) {
          ctx.progress(QString("policy %1: %2 tokens").arg(policy + 1).arg(tokens));
          return !ctx.cancelled();
        };
        auto model = core::cached_model(model_id);
        std::vector<int32_t> ids = core::tokenize_stream(*model, text);
        if (bos && model->config().bos_token_id)
          ids.insert(ids.begin(), int32_t(*model->config().bos_token_id));
        require(layer < model->info().n_layers && head < model->info().n_kv_heads,
                ErrorCode::InvalidArgument,
                "the model has " + std::to_string(model->info().n_layers) + " layers and " +
                    std::to_string(model->info().n_kv_heads) + " KV heads");
        return std::make_shared<core::StreamResult>(core::run_stream(*model, model_id, ids, o));
      },
      [this](std::shared_ptr<core::StreamResult> r) { finished(std::move(r)); }, std::move(hooks));
}

void DecodeDialog::finished(std::shared_ptr<core::StreamResult> r) {
  result_ = std::move(r);
  table_->setRowCount(int(result_->runs.size()));
  for (int i = 0; i < int(result_->runs.size()); ++i) {
    const core::PolicyRun& p = result_->runs[size_t(i)];
    const int n = int(p.nll.size());
    const QString cells[] = {
        QString::fromStdString(p.spec) + (p.error.empty() ? "" : " (stopped)"),
        QString::number(p.perplexity(), 'f', 2), QString::number(p.perplexity(n - 1000, n), 'f', 2),
        QString::number((p.bytes.empty() ? 0 : p.bytes.back()) / 1024.0, 'f', 1) + " KiB",
        QString::number(p.step_seconds() * 1e3, 'f', 3)};
    for (int c = 0; c < 5; ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c == 0 && !p.error.empty()) item->setToolTip(QString::fromStdString(p.error));
      table_->setItem(i, c, item);
    }
  }
  fig::ensure_gui_app();
  const core::FigureData sf = core::stream_figure(*result_);
  images_[0] = fig::render_figure_image(sf, fig::fit_height(sf, {1800, 0, 200}));
  const core::FigureData cf = core::cache_figure(*result_, layer_->value(), head_->value());
  images_[1] = fig::render_figure_image(cf, fig::fit_height(cf, {1800, 0, 200}));
  export_->setEnabled(true);
  status_->setText(
      QString("%1 tokens under %2 policies").arg(result_->ids.size()).arg(result_->runs.size()));
  show_figures();
}

void DecodeDialog::show_figures() {
  for (int i = 0; i < 2; ++i) {
    QLabel* l = i == 0 ? stream_view_ : cache_view_;
    if (images_[i].isNull()) continue;
    l->setPixmap(QPixmap::fromImage(images_[i])
                     .scaled(l->size(), Qt::KeepAspectRatio, Qt::SmoothTransformation));
  }
}

void DecodeDialog::export_current() {
  const bool steps = tabs_->currentWidget() == steps_view_;
  if (steps && !steps_view_->result()) {
    status_->setText("Trace a policy in the step-through tab first.");
    return;
  }
  if (!steps && !result_) return;
  const QString path = QFileDialog::getSaveFileName(
      this, "Export figure", steps ? "decode.pdf" : "stream.pdf", "Figures (*.pdf *.svg *.png)");
  if (path.isEmpty()) return;
  try {
    const core::FigureData d = steps ? steps_view_->figure()
                               : tabs_->currentIndex() == 1
                                   ? core::cache_figure(*result_, layer_->value(), head_->value())
                                   : core::stream_figure(*result_);
    fig::export_figure(d, path.toStdString(), fig::fit_height(d, {2100, 0, 300}));
    status_->setText("wrote " + path);
  } catch (const std::exception& e) {
    status_->setText(QString("Export failed: ") + e.what());
  }
}

void DecodeDialog::closeEvent(QCloseEvent* e) {
  runner_.cancel_all();  // the stream stops at its next progress report
  QDialog::closeEvent(e);
}

}  // namespace attn::gui
