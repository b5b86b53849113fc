#include "app/gui/variant_slot.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>
#include <cmath>

#include "compute/approximation.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/registry.h"
#include "compute/spec.h"

namespace attn::gui {
namespace {

bool is_pattern(PieceKind k) {
  return k == PieceKind::Pattern || k == PieceKind::Dense || k == PieceKind::Selective;
}

std::string number(double v, bool integral) {
  if (integral) return std::to_string(int64_t(std::llround(v)));
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

VariantSlot::VariantSlot(const QString& title, QWidget* parent) : QGroupBox(title, parent) {
  setCheckable(true);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(6, 6, 6, 6);
  pattern_.combo = new QComboBox;
  norm_.combo = new QComboBox;
  approx_.combo = new QComboBox;
  approx_.combo->addItem("approximation: none (exact attention)", QString());
  for (const PieceInfo& p : registry_pieces()) {
    const QString label = QString::fromStdString(p.info.display_name);
    const QString id = QString::fromStdString(p.info.id);
    const QString tip = QString::fromStdString(p.info.description + "\n" + p.info.source);
    if (is_pattern(p.kind)) {
      pattern_.combo->addItem(label, id);
      pattern_.combo->setItemData(pattern_.combo->count() - 1, tip, Qt::ToolTipRole);
    } else if (p.kind == PieceKind::Normaliser) {
      norm_.combo->addItem(label, id);
      norm_.combo->setItemData(norm_.combo->count() - 1, tip, Qt::ToolTipRole);
    } else if (p.kind == PieceKind::Approximation) {
      approx_.combo->addItem("approximation: " + label, id);
      approx_.combo->setItemData(approx_.combo->count() - 1, tip, Qt::ToolTipRole);
    }
  }
  for (Piece* piece : {&pattern_, &norm_, &approx_}) {
    piece->params = new QWidget;
    piece->form = new QFormLayout(piece->params);
    piece->form->setContentsMargins(12, 0, 0, 0);
    lay->addWidget(piece->combo);
    lay->addWidget(piece->params);
    connect(piece->combo, &QComboBox::currentIndexChanged, this, [this, piece] {
      rebuild_params(*piece);
      const bool exact_parts = !replacing();
      for (Piece* p : {&pattern_, &norm_}) {
        p->combo->setEnabled(exact_parts);
        p->params->setEnabled(exact_parts);
      }
      if (!quiet_) emit changed();
    });
  }
  backend_ = new QComboBox;
  backend_->addItem("backend: as the Model dock", "");
  for (const std::string& b : backend_names())
    backend_->addItem(QString::fromStdString("backend: " + b), QString::fromStdString(b));
  backend_->setToolTip("Which compute backend runs this variant");
  lay->addWidget(backend_);
  connect(backend_, &QComboBox::currentIndexChanged, this, [this] {
    if (!quiet_) emit changed();
  });
  spec_label_ = new QLabel;
  spec_label_->setWordWrap(true);
  spec_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  spec_label_->setStyleSheet("color: palette(mid); font-family: monospace;");
  lay->addWidget(spec_label_);
  connect(this, &QGroupBox::toggled, this, [this] {
    if (!quiet_) emit changed();
  });
  connect(this, &VariantSlot::changed, this,
          [this] { spec_label_->setText(QString::fromStdString(spec())); });
  rebuild_params(pattern_);
  rebuild_params(norm_);
  rebuild_params(approx_);
  spec_label_->setText(QString::fromStdString(spec()));
}

void VariantSlot::rebuild_params(Piece& piece) {
  while (piece.form->rowCount() > 0) piece.form->removeRow(0);
  piece.editors.clear();
  const std::string id = piece.combo->currentData().toString().toStdString();
  if (id.empty()) return;
  const PieceInfo& info = registry_piece(id);
  for (const ParamSpec& ps : info.info.params) {
    QWidget* ed = nullptr;
    if (ps.type == ParamSpec::Type::Int) {
      auto* s = new QSpinBox;
      s->setRange(int(ps.min), int(std::min(ps.max, 1e9)));
      s->setValue(int(ps.def));
      s->setKeyboardTracking(false);
      connect(s, &QSpinBox::valueChanged, this, [this] {
        if (!quiet_) emit changed();
      });
      ed = s;
    } else if (ps.type == ParamSpec::Type::Float) {
      auto* s = new QDoubleSpinBox;
      s->setDecimals(4);
      s->setRange(ps.min, ps.max);
      s->setSingleStep(std::max(1e-3, (ps.max - ps.min) / 100));
      s->setValue(ps.def);
      s->setKeyboardTracking(false);
      connect(s, &QDoubleSpinBox::valueChanged, this, [this] {
        if (!quiet_) emit changed();
      });
      ed = s;
    } else if (ps.type == ParamSpec::Type::Enum) {
      auto* c = new QComboBox;
      for (const std::string& w : ps.choices) c->addItem(QString::fromStdString(w));
      c->setCurrentIndex(int(ps.def));
      connect(c, &QComboBox::currentIndexChanged, this, [this] {
        if (!quiet_) emit changed();
      });
      ed = c;
    } else {
      auto* c = new QCheckBox;
      c->setChecked(ps.def != 0);
      connect(c, &QCheckBox::toggled, this, [this] {
        if (!quiet_) emit changed();
      });
      ed = c;
    }
    ed->setObjectName(QString::fromStdString(ps.name));
    ed->setToolTip(QString::fromStdString(ps.help));
    piece.form->addRow(QString::fromStdString(ps.name), ed);
    piece.editors.push_back(ed);
  }
}

std::string VariantSlot::piece_spec(const Piece& piece) const {
  const std::string id = piece.combo->currentData().toString().toStdString();
  const PieceInfo& info = registry_piece(id);
  if (info.info.params.empty()) return id;
  std::string s = id + "(";
  for (size_t i = 0; i < info.info.params.size() && i < piece.editors.size(); ++i) {
    const ParamSpec& ps = info.info.params[i];
    if (auto* e = qobject_cast<QComboBox*>(piece.editors[i])) {
      s += (i ? "," : "") + ps.name + "=" + e->currentText().toStdString();
      continue;
    }
    double v = 0;
    if (auto* a = qobject_cast<QSpinBox*>(piece.editors[i]))
      v = a->value();
    else if (auto* b = qobject_cast<QDoubleSpinBox*>(piece.editors[i]))
      v = b->value();
    else if (auto* c = qobject_cast<QCheckBox*>(piece.editors[i]))
      v = c->isChecked() ? 1 : 0;
    s += (i ? "," : "") + ps.name + "=" + number(v, ps.type != ParamSpec::Type::Float);
  }
  return s + ")";
}

bool VariantSlot::replacing() const {
  const std::string a = approx_.combo->currentData().toString().toStdString();
  if (a.empty()) return false;
  const Variant v = make_variant(a);  // the piece alone, at its defaults
  return v.approximation() && v.approximation()->kind() == Approximation::Kind::Replace;
}

std::string VariantSlot::spec() const {
  const std::string a = approx_.combo->currentData().toString().toStdString();
  if (!a.empty() && replacing()) return piece_spec(approx_);
  std::string s = piece_spec(pattern_);
  const std::string n = norm_.combo->currentData().toString().toStdString();
  if (n != "softmax") s += "+" + piece_spec(norm_);
  if (!a.empty()) s += "+" + piece_spec(approx_);
  return s;
}

void VariantSlot::set_spec(const std::string& spec) {
  const Variant v = make_variant(spec);  // validates; canonical form below
  quiet_ = true;
  bool has_norm = false, has_approx = false;
  for (const SpecPiece& p : parse_spec(v.spec())) {
    const PieceInfo& info = registry_piece(p.id);
    Piece* target = is_pattern(info.kind)                   ? &pattern_
                    : info.kind == PieceKind::Normaliser    ? &norm_
                    : info.kind == PieceKind::Approximation ? &approx_
                                                            : nullptr;
    if (!target) continue;  // score modifiers are not offered in slots
    has_norm |= target == &norm_;
    has_approx |= target == &approx_;
    target->combo->setCurrentIndex(target->combo->findData(QString::fromStdString(p.id)));
    rebuild_params(*target);
    for (const auto& [name, text] : p.params) {
      for (QWidget* ed : target->editors) {
        if (ed->objectName().toStdString() != name) continue;
        if (auto* e = qobject_cast<QComboBox*>(ed)) {  // an Enum: its word
          e->setCurrentIndex(e->findText(QString::fromStdString(text)));
          continue;
        }
        const double value = std::stod(text);  // canonical specs spell plain numbers
        if (auto* a = qobject_cast<QSpinBox*>(ed))
          a->setValue(int(std::lround(value)));
        else if (auto* b = qobject_cast<QDoubleSpinBox*>(ed))
          b->setValue(value);
        else if (auto* c = qobject_cast<QCheckBox*>(ed))
          c->setChecked(value != 0);
      }
    }
  }
  if (!has_norm) {
    norm_.combo->setCurrentIndex(norm_.combo->findData("softmax"));
    rebuild_params(norm_);
  }
  if (!has_approx) {
    approx_.combo->setCurrentIndex(0);
    rebuild_params(approx_);
  }
  const bool exact_parts = !replacing();
  for (Piece* p : {&pattern_, &norm_}) {
    p->combo->setEnabled(exact_parts);
    p->params->setEnabled(exact_parts);
  }
  setChecked(true);
  quiet_ = false;
  spec_label_->setText(QString::fromStdString(this->spec()));
  emit changed();
}

}  // namespace attn::gui

namespace attn::gui {

std::string VariantSlot::backend() const {
  return backend_->currentData().toString().toStdString();
}

void VariantSlot::set_backend(const std::string& name) {
  const int i = backend_->findData(QString::fromStdString(name));
  backend_->setCurrentIndex(i < 0 ? 0 : i);
}

}  // namespace attn::gui
