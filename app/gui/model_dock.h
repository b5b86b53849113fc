// Model dock: the embedded default models, a model folder or .npy tensors, the layer and head
// shown, and the compute backend; shows architecture, layers, heads and context.
#pragma once
#include <QDockWidget>
#include <optional>
#include <string>

#include "app/core/session/model_catalog.h"

class QComboBox;
class QLabel;
class QSpinBox;

namespace attn::gui {

class ModelDock : public QDockWidget {
  Q_OBJECT
 public:
  explicit ModelDock(QWidget* parent = nullptr);
  // "default-text", "teaching-text", "default-vision", "synthetic", or a folder.
  std::string model() const;
  void set_model(const QString& name);
  std::string tensors() const { return tensors_; }
  void set_tensors(const QString& dir);
  int layer() const;
  int head() const;
  void set_selection(int layer, int head);
  std::string backend() const;
  void set_backend(const QString& name);
  int synthetic_tokens() const;
  void set_synthetic_tokens(int n);
  // Shows what was loaded, and bounds the layer and head pickers.
  void show_info(const std::optional<core::ModelInfo>& info, const QString& summary, int layers,
                 int heads);

 signals:
  void model_changed();
  void selection_changed();
  void open_folder_requested();
  void open_tensors_requested();

 private:
  QComboBox* model_ = nullptr;
  QComboBox* backend_ = nullptr;
  QSpinBox* layer_ = nullptr;
  QSpinBox* head_ = nullptr;
  QSpinBox* tokens_ = nullptr;
  QLabel* info_ = nullptr;
  std::string tensors_;
};

}  // namespace attn::gui
