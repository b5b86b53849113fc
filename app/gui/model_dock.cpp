#include "app/gui/model_dock.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "compute/backend.h"

namespace attn::gui {

ModelDock::ModelDock(QWidget* parent) : QDockWidget("Model", parent) {
  setObjectName("ModelDock");
  auto* w = new QWidget;
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(4, 4, 4, 4);
  model_ = new QComboBox;
  // Long entries (a model folder's path) must not widen the dock and squeeze the view.
  model_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  model_->setMinimumContentsLength(24);
  model_->addItem("default-text (GPT-2, embedded)", "default-text");
  model_->addItem("teaching-text (GPT-2, embedded, lessons)", "teaching-text");
  model_->setItemData(model_->count() - 1,
                      "A small GPT-2 with an induction head, a previous-token head and a sink head "
                      "(assets/models/teaching-text)",
                      Qt::ToolTipRole);
  model_->addItem("default-vision (ViT, embedded)", "default-vision");
  model_->addItem("synthetic (random Q/K/V, long context)", "synthetic");
  lay->addWidget(model_);
  auto* row = new QHBoxLayout;
  auto* folder = new QPushButton("Open model folder...");
  auto* tensors = new QPushButton("Open tensors...");
  folder->setToolTip("A Hugging Face folder: config.json, *.safetensors, tokenizer files");
  tensors->setToolTip("A folder with q.npy, k.npy, v.npy [heads, tokens, head_dim]");
  row->addWidget(folder);
  row->addWidget(tensors);
  lay->addLayout(row);
  auto* form = new QFormLayout;
  layer_ = new QSpinBox;
  head_ = new QSpinBox;
  tokens_ = new QSpinBox;
  tokens_->setRange(16, 32768);
  tokens_->setValue(4096);
  tokens_->setSingleStep(256);
  tokens_->setKeyboardTracking(false);
  tokens_->setToolTip("Tokens of the synthetic problem");
  backend_ = new QComboBox;
  for (const std::string& b : backend_names()) backend_->addItem(QString::fromStdString(b));
  backend_->setCurrentText("cpu");
  form->addRow("Layer", layer_);
  form->addRow("Head", head_);
  form->addRow("Synthetic tokens", tokens_);
  form->addRow("Backend", backend_);
  lay->addLayout(form);
  info_ = new QLabel("No model loaded yet.");
  info_->setWordWrap(true);
  info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lay->addWidget(info_);
  lay->addStretch();
  setWidget(w);
  connect(model_, &QComboBox::currentIndexChanged, this, [this] {
    if (model_->currentData().toString() != "tensors") tensors_.clear();
    emit model_changed();
  });
  connect(backend_, &QComboBox::currentIndexChanged, this, &ModelDock::model_changed);
  connect(tokens_, &QSpinBox::valueChanged, this, [this] {
    if (model() == "synthetic") emit model_changed();
  });
  connect(layer_, &QSpinBox::valueChanged, this, &ModelDock::selection_changed);
  connect(head_, &QSpinBox::valueChanged, this, &ModelDock::selection_changed);
  connect(folder, &QPushButton::clicked, this, &ModelDock::open_folder_requested);
  connect(tensors, &QPushButton::clicked, this, &ModelDock::open_tensors_requested);
}

std::string ModelDock::model() const {
  return model_->currentData().toString().toStdString();
}

void ModelDock::set_model(const QString& name) {
  int i = model_->findData(name);
  if (i < 0) {
    model_->addItem(name, name);
    i = model_->count() - 1;
  }
  model_->setCurrentIndex(i);
}

void ModelDock::set_tensors(const QString& dir) {
  tensors_ = dir.toStdString();
  int i = model_->findData("tensors");
  if (i < 0) {
    model_->addItem("tensors (.npy)", "tensors");
    i = model_->count() - 1;
  }
  model_->setItemText(i, "tensors: " + dir);
  if (model_->currentIndex() == i)
    emit model_changed();
  else
    model_->setCurrentIndex(i);
}

int ModelDock::layer() const {
  return layer_->value();
}
int ModelDock::head() const {
  return head_->value();
}
void ModelDock::set_selection(int layer, int head) {
  layer_->setValue(layer);
  head_->setValue(head);
}
std::string ModelDock::backend() const {
  return backend_->currentText().toStdString();
}
int ModelDock::synthetic_tokens() const {
  return tokens_->value();
}
void ModelDock::set_synthetic_tokens(int n) {
  tokens_->setValue(n);
}

void ModelDock::show_info(const std::optional<core::ModelInfo>& info, const QString& summary,
                          int layers, int heads) {
  layer_->blockSignals(true);
  head_->blockSignals(true);
  layer_->setRange(0, std::max(0, layers - 1));
  head_->setRange(0, std::max(0, heads - 1));
  layer_->blockSignals(false);
  head_->blockSignals(false);
  if (!info) {
    info_->setText(summary);
    return;
  }
  info_->setText(QString("<b>%1</b> (%2)<br>%3 layers, %4 heads (%5 kv), head dim %6<br>hidden %7, "
                         "context %8, %9<br><small>%10</small>")
                     .arg(QString::fromStdString(info->model_type))
                     .arg(QString::fromStdString(info->architecture))
                     .arg(info->n_layers)
                     .arg(info->n_heads)
                     .arg(info->n_kv_heads)
                     .arg(info->head_dim)
                     .arg(info->hidden)
                     .arg(info->max_tokens ? QString::number(info->max_tokens) : "unbounded")
                     .arg(info->causal ? "causal" : "bidirectional")
                     .arg(QString::fromStdString(info->dir).toHtmlEscaped()));
}

}  // namespace attn::gui

namespace attn::gui {

void ModelDock::set_backend(const QString& name) {
  if (backend_->findText(name) >= 0) backend_->setCurrentText(name);
}

}  // namespace attn::gui
