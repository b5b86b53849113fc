#include "app/gui/interventions_dock.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPointer>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <thread>

#include "app/core/interventions.h"
#include "compute/error.h"
#include "render/colormap.h"

namespace attn::gui {
namespace {

std::string name(int layer, int head) {
  return "L" + std::to_string(layer) + "H" + std::to_string(head);
}

QString fixed(double v, int digits) {
  return QString::number(v, 'f', digits);
}

}  // namespace

InterventionsDock::InterventionsDock(QWidget* parent)
    : QDockWidget("Interventions", parent), alive_(std::make_shared<bool>(true)) {
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
  setWidget(w);

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
  connect(scan_button_, &QPushButton::clicked, this, [this] { start_scan(); });
}

InterventionsDock::~InterventionsDock() {
  *alive_ = false;
  if (worker_.joinable()) worker_.join();
}

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
  scan_button_->setEnabled(!scanning_ && a->info->causal && a->info->vocab > 0);
  paint_cells();
  update_summary();
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
        text = (d >= 0 ? "+" : "") + fixed(d, 2);
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
                          " plain) with that head alone ablated; red raises it.</i>";
  if (asked.empty() || !shown_->ablation_effect) {
    effect_->setText((heads_.empty() ? "No head ablated. Click a head to ablate it."
                                     : "Running the ablated model...") +
                     legend);
    return;
  }
  QString list;
  for (const std::string& h : asked.heads)
    list += (list.isEmpty() ? "" : ", ") + QString::fromStdString(h);
  const EndToEnd& e = *shown_->ablation_effect;
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

bool InterventionsDock::start_scan() {
  if (scanning_ || !shown_ || !shown_->model || !shown_->info || !shown_->info->causal ||
      shown_->input.ids.empty())
    return false;
  scanning_ = true;
  scan_button_->setEnabled(false);
  scan_button_->setText("Scanning...");
  const std::shared_ptr<const Model> model = shown_->model;
  const std::vector<int32_t> ids = shown_->input.ids;
  const HeadEdit::Mode mode = core::ablation_mode(mode_->currentData().toString().toStdString());
  const std::shared_ptr<bool> alive = alive_;
  QPointer<InterventionsDock> self(this);
  if (worker_.joinable()) worker_.join();  // the last scan has posted its result already
  worker_ = std::thread([this, self, alive, model, ids, mode] {
    core::AblationScan s;
    QString error;
    try {
      s = core::ablation_scan(*model, {ids}, mode, 0, 0);
    } catch (const Error& e) {
      error = e.what();
    }
    // Back on the GUI thread; the dock may be gone by then.
    QMetaObject::invokeMethod(
        QCoreApplication::instance(),
        [this, self, alive, s, error] {
          if (!*alive || !self) return;
          scanning_ = false;
          scan_button_->setText("Scan heads");
          scan_button_->setEnabled(true);
          if (error.isEmpty() && s.n_layers == layers_ && s.n_heads == n_heads_) {
            scan_ = s.delta;
            scan_loss_ = s.loss;
          } else if (!error.isEmpty()) {
            effect_->setText("Scan failed: " + error);
          }
          paint_cells();
          update_summary();
          emit scan_done();
        },
        Qt::QueuedConnection);
  });
  return true;
}

}  // namespace attn::gui
