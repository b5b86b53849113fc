// Interventions dock: a layer x head grid of the model's heads. A click ablates a head (or
// restores it) in the session, so every view and variant then shows the ablated model; the dock
// reports the ablated model against the plain one. "Scan heads" colours each cell by the rise of
// the next-token loss on this input when that head alone is ablated
// (app/core/heads/interventions.h), the map to click from.
//
// Below it, activation patching with the session's text as the clean run: a corrupt text of the
// same length, a target and a foil token, and what to patch (head outputs, the residual stream
// per position, or attention patterns). "Patch" fills a layer x head or layer x position grid of
// effects; a click on a cell runs that one patch and shows the patched run's logit difference
// and next-token predictions beside the clean and corrupt ones. The setup is the session's
// (SessionPatch); the grids are computed on request on a worker thread.
#pragma once
#include <QDockWidget>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/session.h"

class QComboBox;
class QLabel;
class QLineEdit;
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

  // The patching setup as the fields hold it, and setting them (no signal).
  core::SessionPatch patch_setup() const;
  void set_patch_setup(const core::SessionPatch& p);
  // Runs the patching grid for the setup on the shown analysis's model and text (a worker
  // thread); patch_done() follows. Returns false when it cannot start (no text model, a job
  // running); a bad setup (lengths, tokens) is reported in the dock and patch_done() follows.
  bool start_patch();
  // Runs one cell of the last grid alone (as a click does); cell_done() follows.
  bool apply_cell(int layer, int index);
  bool busy() const { return busy_; }
  const core::PatchResult& patch_result() const { return patch_; }
  const core::PatchCell& cell() const { return cell_; }
  QTableWidget* patch_grid() const { return patch_grid_; }
  QLabel* patch_info() const { return patch_info_; }

 signals:
  void changed();       // the ablation changed: the analysis reruns
  void patch_edited();  // the patching setup changed: the session is saved, nothing reruns
  void scan_done();
  void patch_done();
  void cell_done();

 private:
  void rebuild(int layers, int heads);
  void paint_cells();
  void update_summary();
  void paint_patch();
  void set_busy(bool busy);
  // Runs `work` on the worker thread; the function it returns then runs on the GUI thread (not
  // when the dock is gone by then).
  void launch(std::function<std::function<void()>()> work);

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
  bool busy_ = false;  // a scan or a patching job runs (one at a time)

  QLineEdit *corrupt_ = nullptr, *target_ = nullptr, *foil_ = nullptr;
  QComboBox* over_ = nullptr;
  QPushButton* patch_button_ = nullptr;
  QTableWidget* patch_grid_ = nullptr;
  QLabel* patch_info_ = nullptr;
  core::PatchResult patch_;  // the last grid (rows 0 before one ran)
  core::PatchCell cell_;     // the last cell applied alone
  int cell_layer_ = -1, cell_index_ = -1;
  std::vector<int32_t> clean_ids_, corrupt_ids_;  // of the last grid
  int32_t target_id_ = 0, foil_id_ = 0;
  std::shared_ptr<bool> alive_;  // cleared on destruction: a late scan result is dropped
  std::thread worker_;           // the scan (joined before the next and on destruction)
};

}  // namespace attn::gui
