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
// (SessionPatch); the grids are computed on request as jobs (app/gui/job_runner.h): one at a time,
// a scan stopped by its button, every failure shown in the dock, and closing the window never
// waits for a job.
#pragma once
#include <QDockWidget>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/session.h"
#include "app/gui/job_runner.h"

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
  // No input to work on (the text was cleared): the scan and the effect of an earlier input go.
  void show_no_input();
  // Runs the single-head scan on the shown analysis's model and input (a job); scan_done()
  // follows, also when it failed or was stopped. Returns false when there is nothing to scan (no
  // text model) or a job runs.
  bool start_scan();
  // Stops the running job (the scan's button does while it scans); its result is never shown.
  void stop();
  // What the dock says under the grid (the ablation's effect, or why the last job failed).
  QLabel* effect_label() const { return effect_; }
  // Runs `work` as the dock's job, as the scan does: the dock is busy meanwhile, then `done` runs
  // on the GUI thread, or a failure of any kind is shown under the grid ("<what> failed: ...");
  // job_done() follows either, and a stopped job. Returns false while another job runs. For
  // scripted use and tests.
  bool run_job(const QString& what, std::function<void(JobContext&)> work,
               std::function<void()> done = {});
  bool scanning() const { return scanning_; }
  // The last scan's loss rises, f32 [L, H] (empty before a scan).
  const std::vector<float>& scan() const { return scan_; }
  // Toggles the ablation of one head, as a click on its cell does.
  void toggle(int layer, int head);
  QTableWidget* grid() const { return grid_; }

  // The patching setup as the fields hold it, and setting them (no signal).
  core::SessionPatch patch_setup() const;
  void set_patch_setup(const core::SessionPatch& p);
  // Runs the patching grid for the setup on the shown analysis's model and text (a job);
  // patch_done() follows. Returns false when it cannot start (no text model, a job
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
  void job_done();
  void patch_done();
  void cell_done();

 private:
  void rebuild(int layers, int heads);
  void paint_cells();
  void update_summary();
  void paint_patch();
  void show_cell(const core::PatchCell& c);  // the patched run beside the clean and corrupt ones
  void set_busy(bool busy);
  // Runs `work` as the dock's job; `done` gets its result on the GUI thread, `failed` the message
  // of anything it threw, and `ended` follows either (and a stopped job) to clear the busy state.
  template <class Work, class Done>
  void launch(const char* tag, Work work, Done done, std::function<void(const QString&)> failed,
              std::function<void()> ended) {
    set_busy(true);
    runner_.submit(tag, std::move(work), std::move(done),
                   {std::move(failed), {}, [this, ended = std::move(ended)](JobEnd) {
                      set_busy(false);
                      ended();
                    }});
  }
  QString job_error_;  // the last job's failure ("" when it did not fail)

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
  JobRunner runner_;  // destroyed before the child widgets: no job handler runs after that
};

}  // namespace attn::gui
