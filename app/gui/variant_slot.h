// One variant to compare: a pattern, a normaliser and an optional approximation chosen from the
// registry, with parameter widgets generated from each piece's schema (compute/params.h). An
// approximation that replaces attention (linear, performer, nystrom, ...) stands alone, so the
// pattern and normaliser are disabled while one is chosen; one that wraps the exact parts
// (quant_qk, fp8_qk, vq, delta) follows them in the spec. Emits changed() on any edit.
#pragma once
#include <QGroupBox>
#include <string>
#include <vector>

class QComboBox;
class QFormLayout;
class QLabel;
class QWidget;

namespace attn::gui {

class VariantSlot : public QGroupBox {
  Q_OBJECT
 public:
  explicit VariantSlot(const QString& title, QWidget* parent = nullptr);
  // The spec of the chosen pieces and values, e.g. "window(size=64)+sigmoid(bias_offset=0)".
  std::string spec() const;
  // Backend for this variant; empty = the Model dock's.
  std::string backend() const;
  void set_backend(const std::string& name);
  // Sets pattern, normaliser and parameters from a spec (throws attn::Error on a bad one).
  void set_spec(const std::string& spec);
  bool enabled() const { return isChecked(); }

 signals:
  void changed();

 private:
  struct Piece {
    QComboBox* combo = nullptr;
    QWidget* params = nullptr;
    QFormLayout* form = nullptr;
    std::vector<QWidget*> editors;
  };
  void rebuild_params(Piece& piece);
  std::string piece_spec(const Piece& piece) const;
  bool replacing() const;  // the chosen approximation replaces attention

  Piece pattern_, norm_, approx_;
  QLabel* spec_label_ = nullptr;
  QComboBox* backend_ = nullptr;
  bool quiet_ = false;
};

}  // namespace attn::gui
