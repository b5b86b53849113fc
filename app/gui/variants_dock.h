// Variants dock: the dense reference plus up to four variant slots, and presets.
#pragma once
#include <QDockWidget>
#include <string>
#include <vector>

class QCheckBox;
class QComboBox;

namespace attn::gui {

class VariantSlot;

class VariantsDock : public QDockWidget {
  Q_OBJECT
 public:
  static constexpr int kSlots = 4;
  explicit VariantsDock(QWidget* parent = nullptr);
  // Specs of the enabled slots, in order.
  std::vector<std::string> specs() const;
  // Fills slots from specs (the rest are disabled). Throws attn::Error on a bad spec.
  void set_specs(const std::vector<std::string>& specs);
  bool show_dense() const;
  void set_show_dense(bool on);
  // Backend of each enabled slot, in order (empty = the Model dock's).
  std::vector<std::string> backends() const;
  VariantSlot* slot(int i) const { return slots_[size_t(i)]; }

 signals:
  void changed();

 private:
  std::vector<VariantSlot*> slots_;
  QCheckBox* dense_ = nullptr;
  QComboBox* presets_ = nullptr;
};

// Preset comparisons: name and specs.
struct VariantPreset {
  const char* name;
  std::vector<std::string> specs;
};
const std::vector<VariantPreset>& variant_presets();

}  // namespace attn::gui
