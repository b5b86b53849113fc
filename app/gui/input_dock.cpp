#include "app/gui/input_dock.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTextBlock>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "app/core/session/labels.h"

namespace attn::gui {

InputDock::InputDock(QWidget* parent) : QDockWidget("Input", parent) {
  setObjectName("InputDock");
  auto* w = new QWidget;
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(4, 4, 4, 4);
  auto* row = new QHBoxLayout;
  auto* open_text = new QPushButton("Open text...");
  auto* open_image = new QPushButton("Open image...");
  row->addWidget(open_text);
  row->addWidget(open_image);
  row->addStretch();
  lay->addLayout(row);
  editor_ = new QPlainTextEdit;
  editor_->setPlaceholderText("Type or paste text; attention updates as you type.");
  editor_->viewport()->installEventFilter(this);
  editor_->setMouseTracking(true);
  lay->addWidget(editor_, 1);
  info_ = new QLabel;
  info_->setWordWrap(true);
  lay->addWidget(info_);
  image_ = new QLabel;
  image_->setAlignment(Qt::AlignCenter);
  image_->hide();
  lay->addWidget(image_);
  setWidget(w);
  connect(editor_, &QPlainTextEdit::textChanged, this, [this] {
    apply_highlights();
    emit text_changed();
  });
  connect(open_text, &QPushButton::clicked, this, &InputDock::open_text_requested);
  connect(open_image, &QPushButton::clicked, this, &InputDock::open_image_requested);
}

std::string InputDock::text() const {
  return editor_->toPlainText().toStdString();
}

void InputDock::set_text(const QString& text) {
  editor_->setPlainText(text);
}

void InputDock::set_image(const QString& path) {
  if (path.isEmpty()) {
    image_->hide();
    return;
  }
  QPixmap px(path);
  if (px.isNull()) return;
  const int side = 168;
  image_->setPixmap(px.scaled(side, side, Qt::KeepAspectRatio,
                              px.width() < 64 ? Qt::FastTransformation : Qt::SmoothTransformation));
  image_->setToolTip(path);
  image_->show();
}

void InputDock::set_tokens(const std::string& analysed_text, std::vector<core::Token> tokens,
                           std::vector<float> received, std::vector<int> sinks,
                           const QString& notice) {
  analysed_ = analysed_text;
  tokens_ = std::move(tokens);
  // The labels the analysis gives the views: the same function on the same text and pieces.
  std::vector<std::string> pieces;
  for (const core::Token& t : tokens_) pieces.push_back(t.piece);
  labels_ = core::token_labels(analysed_, tokens_, pieces);
  received_ = std::move(received);
  sinks_ = std::move(sinks);
  // Byte offsets of the UTF-8 text -> UTF-16 positions of the editor.
  char_of_byte_.assign(analysed_.size() + 1, 0);
  int ch = 0;
  for (size_t b = 0; b < analysed_.size();) {
    const unsigned char c = static_cast<unsigned char>(analysed_[b]);
    const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    for (int i = 0; i < len && b + size_t(i) < analysed_.size(); ++i)
      char_of_byte_[b + size_t(i)] = ch;
    b += size_t(len);
    ch += len == 4 ? 2 : 1;
  }
  char_of_byte_[analysed_.size()] = ch;
  info_->setText(tokens_.empty()
                     ? notice
                     : QString("%1 tokens. Hover a token for its id and the attention it "
                               "receives; sinks are orange. %2")
                           .arg(tokens_.size())
                           .arg(notice));
  apply_highlights();
}

void InputDock::apply_highlights() {
  QList<QTextEdit::ExtraSelection> sel;
  if (!tokens_.empty() && editor_->toPlainText().toStdString() == analysed_) {
    const bool dark = editor_->palette().color(QPalette::Base).lightness() < 128;
    float mx = 1e-9f;
    for (float r : received_) mx = std::max(mx, r);
    for (size_t t = 0; t < tokens_.size(); ++t) {
      const core::Token& tok = tokens_[t];
      if (tok.end <= tok.begin || tok.end > analysed_.size()) continue;
      QTextEdit::ExtraSelection s;
      s.cursor = QTextCursor(editor_->document());
      s.cursor.setPosition(char_of_byte_[tok.begin]);
      s.cursor.setPosition(char_of_byte_[tok.end], QTextCursor::KeepAnchor);
      const bool sink = std::find(sinks_.begin(), sinks_.end(), int(t)) != sinks_.end();
      const float m = t < received_.size() ? std::sqrt(received_[t] / mx) : 0.f;
      QColor c = t % 2 ? QColor(70, 130, 220) : QColor(60, 170, 150);
      c.setAlphaF(dark ? 0.18 + 0.5 * m : 0.12 + 0.45 * m);
      if (sink) c = QColor(255, 150, 30, 170);
      s.format.setBackground(c);
      sel.append(s);
    }
  }
  editor_->setExtraSelections(sel);
}

int InputDock::token_at_char(int char_pos) const {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const core::Token& tok = tokens_[t];
    if (tok.end <= tok.begin || tok.end > analysed_.size()) continue;
    if (char_pos >= char_of_byte_[tok.begin] && char_pos < char_of_byte_[tok.end]) return int(t);
  }
  return -1;
}

QString InputDock::token_tooltip(int t) const {
  if (t < 0 || size_t(t) >= tokens_.size()) return {};
  return QString(
             "token %1  id %2  '%3'\nreceived mass %4 (mean over heads and queries, selected "
             "layer)")
      .arg(t)
      .arg(tokens_[size_t(t)].id)
      .arg(QString::fromStdString(labels_[size_t(t)]).toHtmlEscaped())
      .arg(size_t(t) < received_.size() ? received_[size_t(t)] : 0.f, 0, 'g', 4);
}

bool InputDock::eventFilter(QObject* o, QEvent* e) {
  if (o == editor_->viewport() && e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const int pos = editor_->cursorForPosition(he->pos()).position();
    const int t = editor_->toPlainText().toStdString() == analysed_ ? token_at_char(pos) : -1;
    if (t >= 0) {
      QToolTip::showText(he->globalPos(), token_tooltip(t), editor_);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QDockWidget::eventFilter(o, e);
}

}  // namespace attn::gui
