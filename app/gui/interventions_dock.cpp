#include "app/gui/interventions_dock.h"

#include <QComboBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "app/core/heads/interventions.h"
#include "app/core/session/model_catalog.h"
#include "compute/error.h"
#include "render/colormap.h"
#include "render/number_format.h"

namespace attn::gui {
namespace {

const QString kPatchHint =
    "Give a corrupt text of the same length, a target and a foil token, then Patch.";
const QString kNeedsLm = "Activation patching needs a causal language model and a text.";

std::string name(int layer, int head) {
  return "L" + std::to_string(layer) + "H" + std::to_string(head);
}

// No "-0.00" (render/number_format.h).
QString fixed(double v, int digits) {
  return QString::fromStdString(render::format_fixed(v, digits));
}

QString html(const std::string& s) {
  return QString::fromStdString(s).toHtmlEscaped();
}

// "' and' 41%, ' upon' 12%, ..." for the patched run's summary.
QString top_list(const std::vector<std::pair<std::string, double>>& top) {
  QString out;
  for (const auto& [piece, p] : top)
    out += (out.isEmpty() ? "" : ", ") + QString("'%1' %2%").arg(html(piece), fixed(100 * p, 0));
  return out;
}

// A cell's background on the diverging map (value / scale in [-1, 1]) and readable text on it.
void paint_diverging(QTableWidgetItem* item, double v, double scale) {
  const render::Rgb8 c =
      render::colormap_rgb8(render::Colormap::Diverging, scale > 0 ? 0.5 + 0.5 * v / scale : 0.5);
  const QColor bg(c.r, c.g, c.b);
  item->setBackground(bg);
  item->setForeground(bg.lightness() > 140 ? QColor(20, 20, 20) : QColor(245, 245, 245));
}

}  // namespace

InterventionsDock::InterventionsDock(QWidget* parent) : QDockWidget("Interventions", parent) {
  setObjectName("InterventionsDock");
  auto* w = new QWidget;
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(4, 4, 4, 4);
  auto* row = new QHBoxLayout;
  mode_ = new QComboBox;
  mode_->addItem("Zero ablation", "zero");
  mode_->addItem("Mean ablation", "mean");
  mode_->setToolTip(
      "Zero: the head's output set to 0 before the output projection (its bias kept). "
      "Mean: replaced by its mean over this input's positions.");
  scan_button_ = new QPushButton("Scan heads");
  scan_button_->setToolTip(
      "Colour each head by how much the next-token loss on this text rises when it alone is "
      "ablated (one forward pass per head)");
  clear_ = new QPushButton("Clear");
  clear_->setToolTip("Restore every head");
  row->addWidget(mode_, 1);
  row->addWidget(scan_button_);
  row->addWidget(clear_);
  lay->addLayout(row);
  grid_ = new QTableWidget;
  grid_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  grid_->setSelectionMode(QAbstractItemView::NoSelection);
  grid_->setFocusPolicy(Qt::NoFocus);
  grid_->setWordWrap(false);
  grid_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  grid_->verticalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  grid_->setToolTip("Click a head to ablate it in every view (click again to restore it)");
  grid_->setMinimumHeight(120);
  lay->addWidget(grid_, 1);
  effect_ = new QLabel("Click a head (layer x head) to ablate it.");
  effect_->setWordWrap(true);
  effect_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lay->addWidget(effect_);

  auto* box = new QGroupBox("Activation patching (this text is the clean run)");
  auto* bl = new QVBoxLayout(box);
  bl->setContentsMargins(4, 4, 4, 4);
  auto* form = new QFormLayout;
  corrupt_ = new QLineEdit;
  corrupt_->setPlaceholderText("The text with a few tokens changed (same number of tokens)");
  target_ = new QLineEdit;
  target_->setPlaceholderText("' and'");
  target_->setToolTip("One token the clean run predicts next (often with a leading space)");
  foil_ = new QLineEdit;
  foil_->setPlaceholderText("' upon'");
  foil_->setToolTip("One token the corrupt run predicts instead");
  over_ = new QComboBox;
  over_->addItem("Residual stream (layer x position)", "positions");
  over_->addItem("Head outputs (layer x head)", "heads");
  over_->addItem("Attention patterns (layer x head)", "patterns");
  over_->setToolTip(
      "What is copied from the clean run into the corrupt one, one piece at a time: the residual "
      "stream after a layer at one position, a head's output, or a head's attention pattern "
      "(the corrupt run's values kept). The plain model runs: the ablation above does not apply.");
  patch_button_ = new QPushButton("Patch");
  patch_button_->setToolTip(
      "Run the corrupt text once per cell with that piece from the clean run; each cell shows "
      "(LD patched - LD corrupt) / (LD clean - LD corrupt), LD = logit(target) - logit(foil)");
  form->addRow("Corrupt", corrupt_);
  auto* tokens = new QHBoxLayout;
  tokens->addWidget(new QLabel("Target"));
  tokens->addWidget(target_, 1);
  tokens->addWidget(new QLabel("Foil"));
  tokens->addWidget(foil_, 1);
  form->addRow(tokens);
  auto* run_row = new QHBoxLayout;
  run_row->addWidget(over_, 1);
  run_row->addWidget(patch_button_);
  form->addRow(run_row);
  bl->addLayout(form);
  patch_grid_ = new QTableWidget;
  patch_grid_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  patch_grid_->setSelectionMode(QAbstractItemView::NoSelection);
  patch_grid_->setFocusPolicy(Qt::NoFocus);
  patch_grid_->setWordWrap(false);
  patch_grid_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  patch_grid_->verticalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  patch_grid_->setToolTip("Click a cell to run that one patch and see the patched predictions");
  patch_grid_->setMinimumHeight(110);
  bl->addWidget(patch_grid_, 1);
  patch_info_ = new QLabel(kPatchHint);
  patch_info_->setWordWrap(true);
  patch_info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  bl->addWidget(patch_info_);
  lay->addWidget(box, 2);
  setWidget(w);

  for (QLineEdit* e : {corrupt_, target_, foil_})
    connect(e, &QLineEdit::textEdited, this, [this] { emit patch_edited(); });
  connect(over_, &QComboBox::currentIndexChanged, this, [this] { emit patch_edited(); });
  connect(corrupt_, &QLineEdit::returnPressed, this, [this] { start_patch(); });
  connect(patch_button_, &QPushButton::clicked, this, [this] { start_patch(); });
  connect(patch_grid_, &QTableWidget::cellClicked, this,
          [this](int r, int c) { apply_cell(r, c); });

  connect(grid_, &QTableWidget::cellClicked, this, [this](int r, int c) { toggle(r, c); });
  connect(mode_, &QComboBox::currentIndexChanged, this, [this] {
    if (!heads_.empty()) emit changed();
  });
  connect(clear_, &QPushButton::clicked, this, [this] {
    if (heads_.empty()) return;
    heads_.clear();
    paint_cells();
    emit changed();
  });
  connect(scan_button_, &QPushButton::clicked, this,
          [this] { scanning_ ? stop() : void(start_scan()); });
}

// The runner cancels a running job and never waits for it long (JobRunner::kStopWaitMs).
InterventionsDock::~InterventionsDock() = default;

core::SessionAblation InterventionsDock::ablation() const {
  core::SessionAblation a;
  for (const auto& [l, h] : heads_) a.heads.push_back(name(l, h));
  a.mode = mode_->currentData().toString().toStdString();
  return a;
}

void InterventionsDock::set_ablation(const core::SessionAblation& a) {
  heads_.clear();
  for (const std::string& h : a.heads)
    for (const auto& lh : core::parse_heads(h)) heads_.push_back(lh);
  std::sort(heads_.begin(), heads_.end());
  heads_.erase(std::unique(heads_.begin(), heads_.end()), heads_.end());
  const int i = mode_->findData(QString::fromStdString(a.mode));
  mode_->blockSignals(true);
  mode_->setCurrentIndex(std::max(0, i));
  mode_->blockSignals(false);
  paint_cells();
}

void InterventionsDock::toggle(int layer, int head) {
  if (layer < 0 || head < 0 || (layers_ > 0 && (layer >= layers_ || head >= n_heads_))) return;
  const std::pair<int, int> lh{layer, head};
  auto it = std::find(heads_.begin(), heads_.end(), lh);
  if (it == heads_.end()) {
    heads_.insert(std::upper_bound(heads_.begin(), heads_.end(), lh), lh);
  } else {
    heads_.erase(it);
  }
  paint_cells();
  emit changed();
}

void InterventionsDock::show_analysis(std::shared_ptr<const core::Analysis> a) {
  const bool model = a && a->model && a->info;
  setEnabled(model);
  if (!model) {
    shown_ = nullptr;
    effect_->setText(
        "Interventions need a model: raw tensors and synthetic inputs have no "
        "heads to ablate.");
    return;
  }
  // A new model or input invalidates the scan (same shape: the next scan replaces it).
  if (!shown_ || shown_->model != a->model || shown_->input.ids != a->input.ids) scan_.clear();
  shown_ = a;
  if (a->info->n_layers != layers_ || a->info->n_heads != n_heads_)
    rebuild(a->info->n_layers, a->info->n_heads);
  const bool lm = a->info->causal && a->info->vocab > 0 && !a->info->vision;
  scan_button_->setEnabled(!busy_ && lm);
  patch_button_->setEnabled(!busy_ && lm);
  if (!lm && !busy_)
    patch_info_->setText(kNeedsLm);
  else if (lm && patch_info_->text() == kNeedsLm)
    patch_info_->setText(kPatchHint);  // back on a causal LM: the refusal no longer holds
  paint_cells();
  update_summary();
}

void InterventionsDock::show_no_input() {
  shown_ = nullptr;
  scan_.clear();
  paint_cells();
  scan_button_->setEnabled(false);
  patch_button_->setEnabled(false);
  effect_->setText("No input: type a text to ablate, scan or patch its heads.");
}

void InterventionsDock::rebuild(int layers, int heads) {
  layers_ = layers;
  n_heads_ = heads;
  scan_.clear();
  // Heads the new model lacks are dropped from the ablation.
  heads_.erase(
      std::remove_if(heads_.begin(), heads_.end(),
                     [&](const auto& lh) { return lh.first >= layers || lh.second >= heads; }),
      heads_.end());
  grid_->clear();
  grid_->setRowCount(layers);
  grid_->setColumnCount(heads);
  QStringList rows, cols;
  for (int l = 0; l < layers; ++l) rows << "L" + QString::number(l);
  for (int h = 0; h < heads; ++h) cols << "H" + QString::number(h);
  grid_->setVerticalHeaderLabels(rows);
  grid_->setHorizontalHeaderLabels(cols);
  for (int l = 0; l < layers; ++l)
    for (int h = 0; h < heads; ++h) {
      auto* item = new QTableWidgetItem;
      item->setTextAlignment(Qt::AlignCenter);
      grid_->setItem(l, h, item);
    }
}

void InterventionsDock::paint_cells() {
  const bool have_scan = scan_.size() == size_t(layers_) * size_t(n_heads_) && !scan_.empty();
  double top = 0;
  for (float v : scan_) top = std::max(top, double(std::fabs(v)));
  const QColor base = grid_->palette().color(QPalette::Base);
  for (int l = 0; l < layers_; ++l)
    for (int h = 0; h < n_heads_; ++h) {
      QTableWidgetItem* item = grid_->item(l, h);
      if (!item) continue;
      const bool ablated = std::binary_search(heads_.begin(), heads_.end(), std::pair{l, h});
      QString text, tip = QString::fromStdString(name(l, h));
      QColor bg = base;
      if (have_scan) {
        const double d = scan_[size_t(l) * n_heads_ + h];
        // Diverging around 0: loss rises red, falls blue, scaled by the largest change.
        const render::Rgb8 c =
            render::colormap_rgb8(render::Colormap::Diverging, top > 0 ? 0.5 + 0.5 * d / top : 0.5);
        bg = QColor(c.r, c.g, c.b);
        text = fixed(d, 2);
        if (!text.startsWith('-') && text != fixed(0, 2)) text = "+" + text;
        tip += ": next-token loss " + fixed(scan_loss_, 3) + (d >= 0 ? " + " : " - ") +
               fixed(std::fabs(d), 4) + " nats when ablated alone";
      }
      if (ablated) {
        text = have_scan ? "\u2715 " + text : "\u2715";
        tip += " (ablated: click to restore)";
      }
      item->setText(text);
      item->setToolTip(tip);
      item->setBackground(bg);
      // Dark text on light cells, light text on dark ones (the map's ends are dark).
      item->setForeground(!have_scan             ? grid_->palette().color(QPalette::Text)
                          : bg.lightness() > 140 ? QColor(20, 20, 20)
                                                 : QColor(245, 245, 245));
      QFont f = item->font();
      f.setBold(ablated);
      item->setFont(f);
    }
  clear_->setEnabled(!heads_.empty());
}

void InterventionsDock::update_summary() {
  if (!shown_) return;
  const core::SessionAblation& asked = shown_->session.ablation;
  const QString legend =
      scan_.empty() ? QString()
                    : "<br><i>Cells: change of the next-token loss (nats, " + fixed(scan_loss_, 3) +
                          " plain: the mean over this text's predicted tokens) with that head "
                          "alone ablated; red raises it.</i>";
  if (asked.empty() || !shown_->ablation_effect) {
    effect_->setText((heads_.empty() ? "No head ablated. Click a head to ablate it."
                                     : "Running the ablated model...") +
                     legend);
    return;
  }
  QString list;
  for (const std::string& h : asked.heads)
    list += (list.isEmpty() ? "" : ", ") + QString::fromStdString(h);
  const core::EndToEnd& e = *shown_->ablation_effect;
  QString text = "<b>" + QString::fromStdString(asked.mode) + " ablation of " + list +
                 "</b>: every view shows the ablated model.<br>Against the plain model: ";
  if (e.has_tokens)
    text += "next-token KL " + QString::number(e.mean_kl, 'g', 3) + ", top-1 agreement " +
            fixed(100 * e.top1_agreement, 1) + "%, perplexity " + fixed(e.ppl_dense, 2) +
            " \u2192 " + fixed(e.ppl_variant, 2);
  else if (e.has_class)
    text += e.class_agree ? "same class" : "class changed";
  else
    text += "CLS cosine " + fixed(e.cls_cosine, 4);
  effect_->setText(text + legend);
}

void InterventionsDock::set_busy(bool busy) {
  busy_ = busy;
  const bool lm = shown_ && shown_->info && shown_->info->causal && shown_->info->vocab > 0 &&
                  !shown_->info->vision;
  scan_button_->setEnabled((!busy || scanning_) && lm);  // while scanning: its stop button
  patch_button_->setEnabled(!busy && lm);
}

bool InterventionsDock::start_scan() {
  if (busy_ || !shown_ || !shown_->model || !shown_->info || !shown_->info->causal ||
      shown_->input.ids.empty())
    return false;
  scanning_ = true;
  scan_button_->setText("Stop scan");
  job_error_.clear();
  const std::shared_ptr<const core::Model> model = shown_->model;
  const std::vector<int32_t> ids = shown_->input.ids;
  const core::HeadEdit::Mode mode =
      core::ablation_mode(mode_->currentData().toString().toStdString());
  launch(
      "scan",
      [model, ids, mode](JobContext& ctx) {
        return core::ablation_scan(*model, {ids}, mode, 0, 0, 1234, false, &ctx.cancel_flag());
      },
      [this](const core::AblationScan& s) {
        if (s.n_layers == layers_ && s.n_heads == n_heads_) {
          scan_ = s.delta;
          scan_loss_ = s.loss;
        }
      },
      [this](const QString& error) { job_error_ = "Scan failed: " + error; },
      [this] {
        scanning_ = false;
        scan_button_->setText("Scan heads");
        paint_cells();
        update_summary();
        if (!job_error_.isEmpty()) effect_->setText(job_error_);
        emit scan_done();
      });
  return true;
}

void InterventionsDock::stop() {
  runner_.cancel_all();
}

bool InterventionsDock::run_job(const QString& what, std::function<void(JobContext&)> work,
                                std::function<void()> done) {
  if (busy_) return false;
  job_error_.clear();
  launch(
      "job", std::move(work),
      [done = std::move(done)] {
        if (done) done();
      },
      [this, what](const QString& error) { job_error_ = what + " failed: " + error; },
      [this] {
        if (!job_error_.isEmpty()) effect_->setText(job_error_);
        emit job_done();
      });
  return true;
}

core::SessionPatch InterventionsDock::patch_setup() const {
  core::SessionPatch p;
  p.corrupt = corrupt_->text().toStdString();
  p.target = target_->text().toStdString();
  p.foil = foil_->text().toStdString();
  p.over = over_->currentData().toString().toStdString();
  return p;
}

void InterventionsDock::set_patch_setup(const core::SessionPatch& p) {
  corrupt_->setText(QString::fromStdString(p.corrupt));
  target_->setText(QString::fromStdString(p.target));
  foil_->setText(QString::fromStdString(p.foil));
  over_->blockSignals(true);
  over_->setCurrentIndex(std::max(0, over_->findData(QString::fromStdString(p.over))));
  over_->blockSignals(false);
}

bool InterventionsDock::start_patch() {
  if (busy_ || !shown_ || !shown_->model || !shown_->info || !shown_->info->causal ||
      shown_->info->vision || shown_->input.ids.empty())
    return false;
  const core::SessionPatch setup = patch_setup();
  const std::shared_ptr<const core::Model> model = shown_->model;
  // The tokens, checked here: a bad setup is the user's to fix, said at once.
  try {
    require(!setup.corrupt.empty(), ErrorCode::InvalidArgument, "give a corrupt text");
    clean_ids_ = shown_->input.ids;
    corrupt_ids_ = core::encode_for_model(*model, setup.corrupt, "the corrupt text").ids;
    require(corrupt_ids_.size() == clean_ids_.size(), ErrorCode::InvalidArgument,
            "the corrupt text is " + std::to_string(corrupt_ids_.size()) +
                " tokens and the clean one " + std::to_string(clean_ids_.size()) +
                ": patching needs the same length");
    target_id_ = core::single_token(*model, setup.target, "the target");
    foil_id_ = core::single_token(*model, setup.foil, "the foil");
  } catch (const std::exception& e) {
    patch_info_->setText("<b>Cannot patch:</b> " + html(e.what()));
    emit patch_done();
    return true;
  }
  patch_button_->setText("Patching...");
  patch_info_->setText("Running one patched pass per cell...");
  core::PatchOptions po;
  po.over = setup.over;
  launch(
      "patch",
      [model, clean = clean_ids_, corrupt = corrupt_ids_, t = target_id_, f = foil_id_,
       po](JobContext& ctx) mutable {
        po.cancel = &ctx.cancel_flag();
        return core::activation_patching(*model, clean, corrupt, t, f, po);
      },
      [this, setup](const core::PatchResult& r) {
        patch_ = r;
        patch_.target_text = setup.target;
        patch_.foil_text = setup.foil;
        cell_layer_ = cell_index_ = -1;
        paint_patch();
        patch_info_->setText(
            QString("LD = logit('%1') - logit('%2') at the last token: clean %3, corrupt %4. "
                    "Cells: the share of that difference one patch restores (1: all of it). "
                    "Click a cell to run it alone.")
                .arg(html(setup.target), html(setup.foil), fixed(r.ld_clean, 3),
                     fixed(r.ld_corrupt, 3)));
      },
      [this](const QString& error) {
        patch_info_->setText("<b>Cannot patch:</b> " + error.toHtmlEscaped());
      },
      [this] {
        patch_button_->setText("Patch");
        emit patch_done();
      });
  return true;
}

bool InterventionsDock::apply_cell(int layer, int index) {
  if (busy_ || !shown_ || !shown_->model || patch_.rows == 0 || layer < 0 || layer >= patch_.rows ||
      index < 0 || index >= patch_.cols)
    return false;
  cell_layer_ = layer;
  cell_index_ = index;
  paint_patch();
  const std::shared_ptr<const core::Model> model = shown_->model;
  launch(
      "cell",
      [model, clean = clean_ids_, corrupt = corrupt_ids_, t = target_id_, f = foil_id_,
       over = patch_.over, layer, index](JobContext&) {
        return core::patch_cell(*model, clean, corrupt, t, f, over, layer, index);
      },
      [this](const core::PatchCell& c) { show_cell(c); },
      [this](const QString& error) {
        patch_info_->setText("<b>Cannot patch:</b> " + error.toHtmlEscaped());
      },
      [this] { emit cell_done(); });
  return true;
}

void InterventionsDock::show_cell(const core::PatchCell& c) {
  cell_ = c;
  QString where = "L" + QString::number(c.layer) + " ";
  if (c.over == "positions") {
    where += "residual stream at position " + QString::number(c.index);
    if (size_t(c.index) < patch_.corrupt_labels.size())
      where += " ('" + html(patch_.corrupt_labels[size_t(c.index)]) + "')";
  } else {
    where +=
        "H" + QString::number(c.index) + (c.over == "patterns" ? " attention pattern" : " output");
  }
  patch_info_->setText(
      "<b>" + where + "</b> from the clean run: LD " + fixed(c.ld_corrupt, 3) + " \u2192 " +
      fixed(c.ld_patched, 3) + " (clean " + fixed(c.ld_clean, 3) + "), effect " +
      fixed(c.effect, 3) + ".<br>Next token \u2014 clean: " + top_list(c.top_clean) +
      "<br>corrupt: " + top_list(c.top_corrupt) + "<br>patched: " + top_list(c.top_patched));
}

void InterventionsDock::paint_patch() {
  const core::PatchResult& r = patch_;
  if (patch_grid_->rowCount() != r.rows || patch_grid_->columnCount() != r.cols) {
    patch_grid_->clear();
    patch_grid_->setRowCount(r.rows);
    patch_grid_->setColumnCount(r.cols);
    for (int l = 0; l < r.rows; ++l)
      for (int j = 0; j < r.cols; ++j) {
        auto* item = new QTableWidgetItem;
        item->setTextAlignment(Qt::AlignCenter);
        patch_grid_->setItem(l, j, item);
      }
  }
  QStringList rows, cols;
  for (int l = 0; l < r.rows; ++l) rows << "L" + QString::number(l);
  for (int j = 0; j < r.cols; ++j)
    cols << (r.over != "positions" ? "H" + QString::number(j)
             : size_t(j) < r.corrupt_labels.size()
                 ? QString::fromStdString(r.corrupt_labels[size_t(j)])
                 : QString::number(j));
  patch_grid_->setVerticalHeaderLabels(rows);
  patch_grid_->setHorizontalHeaderLabels(cols);
  // Positions: one column a token, sized to its label; heads share the width.
  patch_grid_->horizontalHeader()->setSectionResizeMode(
      r.over == "positions" ? QHeaderView::ResizeToContents : QHeaderView::Stretch);
  double top = 1;
  for (float v : r.effect)
    if (std::isfinite(v)) top = std::max(top, double(std::fabs(v)));
  for (int l = 0; l < r.rows; ++l)
    for (int j = 0; j < r.cols; ++j) {
      QTableWidgetItem* item = patch_grid_->item(l, j);
      const double v = r.effect[size_t(l) * r.cols + j];
      paint_diverging(item, v, top);
      item->setText(fixed(v, 2));
      QString tip = "L" + QString::number(l) + (r.over == "positions" ? " position " : " H") +
                    QString::number(j) + ": effect " + fixed(v, 4);
      if (size_t(j) < r.corrupt_labels.size() && r.over == "positions")
        tip += " (corrupt token '" + QString::fromStdString(r.corrupt_labels[size_t(j)]) +
               "', clean '" + QString::fromStdString(r.clean_labels[size_t(j)]) + "')";
      item->setToolTip(tip);
      QFont f = item->font();
      f.setBold(l == cell_layer_ && j == cell_index_);
      f.setUnderline(l == cell_layer_ && j == cell_index_);
      item->setFont(f);
    }
}

}  // namespace attn::gui
