#include "app/gui/variants_dock.h"

#include <QCheckBox>
#include <QComboBox>
#include <QMessageBox>
#include <QScrollArea>
#include <QVBoxLayout>

#include "app/gui/variant_slot.h"
#include "compute/error.h"

namespace attn::gui {

const std::vector<VariantPreset>& variant_presets() {
  static const std::vector<VariantPreset> p = {
      {"Static vs dynamic sparsity",
       {"window(size=32)", "sinks_window(sinks=4,window=32)", "block_topk(block=16,k=4)",
        "top_p(block=16,p=0.9)"}},
      {"Streaming (sinks matter)",
       {"window(size=16)", "sinks_window(sinks=1,window=16)", "sinks_window(sinks=4,window=16)",
        "h2o(heavy=16,recent=16)"}},
      {"Normalisers",
       {"dense+sigmoid(bias_offset=0)", "dense+relu", "dense+entmax15", "dense+softplus"}},
      {"Long-context selectors",
       {"vertical_slash(last_q=64,vertical=128,slash=128)", "block_topk(block=64,k=8)",
        "top_p(block=64,p=0.9)", "sketch_walk(block=64,density=0.2,sketch_dim=16,seed=0)"}},
  };
  return p;
}

VariantsDock::VariantsDock(QWidget* parent) : QDockWidget("Variants", parent) {
  setObjectName("VariantsDock");
  auto* inner = new QWidget;
  auto* lay = new QVBoxLayout(inner);
  lay->setContentsMargins(4, 4, 4, 4);
  presets_ = new QComboBox;
  presets_->addItem("Presets...");
  for (const auto& p : variant_presets()) presets_->addItem(p.name);
  lay->addWidget(presets_);
  dense_ = new QCheckBox("Show the dense reference panel");
  dense_->setChecked(true);
  lay->addWidget(dense_);
  for (int i = 0; i < kSlots; ++i) {
    auto* s = new VariantSlot(QString("Variant %1").arg(i + 1));
    s->setChecked(false);
    lay->addWidget(s);
    slots_.push_back(s);
    connect(s, &VariantSlot::changed, this, &VariantsDock::changed);
  }
  lay->addStretch();
  auto* scroll = new QScrollArea;
  scroll->setWidget(inner);
  scroll->setWidgetResizable(true);
  setWidget(scroll);
  connect(dense_, &QCheckBox::toggled, this, &VariantsDock::changed);
  connect(presets_, &QComboBox::activated, this, [this](int i) {
    if (i <= 0) return;
    try {
      set_specs(variant_presets()[size_t(i - 1)].specs);
    } catch (const Error& e) {
      QMessageBox::warning(this, "Preset", e.what());
    }
    presets_->setCurrentIndex(0);
  });
}

std::vector<std::string> VariantsDock::specs() const {
  std::vector<std::string> out;
  for (VariantSlot* s : slots_)
    if (s->enabled()) out.push_back(s->spec());
  return out;
}

void VariantsDock::set_specs(const std::vector<std::string>& specs) {
  require(specs.size() <= size_t(kSlots), ErrorCode::InvalidArgument,
          "at most 4 variants (got " + std::to_string(specs.size()) + ")");
  blockSignals(true);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (i < specs.size())
      slots_[i]->set_spec(specs[i]);
    else
      slots_[i]->setChecked(false);
  }
  blockSignals(false);
  emit changed();
}

void VariantsDock::set_show_dense(bool on) {
  dense_->setChecked(on);
}

bool VariantsDock::show_dense() const {
  return dense_->isChecked();
}

}  // namespace attn::gui

namespace attn::gui {

std::vector<std::string> VariantsDock::backends() const {
  std::vector<std::string> out;
  for (VariantSlot* s : slots_)
    if (s->enabled()) out.push_back(s->backend());
  return out;
}

}  // namespace attn::gui
