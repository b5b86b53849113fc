#include "app/gui/dialogs.h"

namespace attn::gui {
namespace {

DialogHook& hook() {
  static DialogHook h;
  return h;
}

QMessageBox::StandardButton hooked(const DialogRequest& r) {
  return hook() ? hook()(r) : QMessageBox::NoButton;
}

}  // namespace

DialogHook set_dialog_hook(DialogHook h) {
  std::swap(hook(), h);
  return h;
}

void show_error(QWidget* parent, const QString& title, const QString& text) {
  if (hooked({"error", title, text, QMessageBox::Ok}) != QMessageBox::NoButton) return;
  QMessageBox::warning(parent, title, text);
}

void show_warning(QWidget* parent, const QString& title, const QString& text) {
  if (hooked({"warning", title, text, QMessageBox::Ok}) != QMessageBox::NoButton) return;
  QMessageBox::warning(parent, title, text);
}

QMessageBox::StandardButton ask_unsaved(QWidget* parent, const QString& text) {
  const auto buttons = QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel;
  const QMessageBox::StandardButton b = hooked({"unsaved", "Unsaved changes", text, buttons});
  if (b != QMessageBox::NoButton) return b;
  const auto answer =
      QMessageBox::question(parent, "Unsaved changes", text, buttons, QMessageBox::Save);
  return answer == QMessageBox::Save || answer == QMessageBox::Discard ? answer
                                                                       : QMessageBox::Cancel;
}

}  // namespace attn::gui
