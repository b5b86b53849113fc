// Input dock: the text editor, with every token of the last analysis highlighted by its byte span
// (hover: its label as the views show it, id, position, received mass; sinks in orange), and the
// image preview for vision models.
#pragma once
#include <QDockWidget>
#include <memory>
#include <string>
#include <vector>

#include "app/core/session/model_catalog.h"

class QLabel;
class QPlainTextEdit;

namespace attn::gui {

class InputDock : public QDockWidget {
  Q_OBJECT
 public:
  explicit InputDock(QWidget* parent = nullptr);
  std::string text() const;
  void set_text(const QString& text);
  void set_image(const QString& path);  // preview only
  // Tokens of `analysed_text` with their received mass and sink flags; shown while the editor
  // still holds that text.
  void set_tokens(const std::string& analysed_text, std::vector<core::Token> tokens,
                  std::vector<float> received, std::vector<int> sinks, const QString& notice);
  QPlainTextEdit* editor() const { return editor_; }
  // The hover text of token `t` (empty when there is none): its display label as the views show
  // it (core::token_labels), id, position and received mass.
  QString token_tooltip(int t) const;

 signals:
  void text_changed();
  void open_text_requested();
  void open_image_requested();

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void apply_highlights();
  int token_at_char(int char_pos) const;

  QPlainTextEdit* editor_ = nullptr;
  QLabel* info_ = nullptr;
  QLabel* image_ = nullptr;
  std::string analysed_;
  std::vector<core::Token> tokens_;
  std::vector<std::string> labels_;  // [tokens] display labels, as the views show them
  std::vector<float> received_;
  std::vector<int> sinks_;
  std::vector<int> char_of_byte_;  // UTF-16 index of each byte of analysed_ (+ end)
};

}  // namespace attn::gui
