// Interventions dock: a layer x head grid of the model's heads. A click ablates a head (or
// restores it) in the session, so every view and variant then shows the ablated model; the dock
// reports the ablated model against the plain one. "Scan heads" colours each cell by the rise of
// the next-token loss on this input when that head alone is ablated (app/core/interventions.h),
// the map to click from.
#pragma once
#include <QDockWidget>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/core/analysis.h"
#include "app/core/session.h"

class QComboBox;
class QLabel;
class QPushButton;
class QTableWidget;

namespace attn::gui {

class InterventionsDock : public QDockWidget {
  Q_OBJECT
 public:
  explicit InterventionsDock(QWidget* parent = nullptr);
  ~InterventionsDock() override;

  // The session's ablation as the grid shows it ("L0H3" entries in layer, head order).
  core::SessionAblation ablation() const;
  void set_ablation(const core::SessionAblation& a);
  // Shapes the grid for the analysed model and shows the ablation's effect; a model-free input
  // (tensors, synthetic) disables the dock.
  void show_analysis(std::shared_ptr<const core::Analysis> a);
  // Runs the single-head scan on the shown analysis's model and input (a background thread);
  // scan_done() follows. Returns false when there is nothing to scan (no text model).
  bool start_scan();
  bool scanning() const { return scanning_; }
  // The last scan's loss rises, f32 [L, H] (empty before a scan).
  const std::vector<float>& scan() const { return scan_; }
  // Toggles the ablation of one head, as a click on its cell does.
  void toggle(int layer, int head);
  QTableWidget* grid() const { return grid_; }

 signals:
  void changed();
  void scan_done();

 private:
  void rebuild(int layers, int heads);
  void paint_cells();
  void update_summary();

  QComboBox* mode_ = nullptr;
  QTableWidget* grid_ = nullptr;
  QLabel* effect_ = nullptr;
  QPushButton* scan_button_ = nullptr;
  QPushButton* clear_ = nullptr;
  std::vector<std::pair<int, int>> heads_;  // ablated, sorted
  int layers_ = 0, n_heads_ = 0;
  std::shared_ptr<const core::Analysis> shown_;
  std::vector<float> scan_;  // f32 [L, H] loss rise, empty before a scan
  double scan_loss_ = 0;
  bool scanning_ = false;
  std::shared_ptr<bool> alive_;  // cleared on destruction: a late scan result is dropped
  std::thread worker_;           // the scan (joined before the next and on destruction)
};

}  // namespace attn::gui
