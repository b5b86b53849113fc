// The main window's messages and questions (a load refused, unsaved changes), through one place
// that a test can answer without a modal loop: set_dialog_hook().
#pragma once
#include <QMessageBox>
#include <QString>
#include <functional>

namespace attn::gui {

// What the window asks or says. `kind` tells them apart: "unsaved" (Save / Discard / Cancel
// before quitting or opening another session or model), "error" (a load refused) or "warning"
// (a load that goes ahead, with a word about it).
struct DialogRequest {
  QString kind, title, text;
  QMessageBox::StandardButtons buttons;
};
// Answers a request instead of a dialog; QMessageBox::NoButton shows the real dialog.
using DialogHook = std::function<QMessageBox::StandardButton(const DialogRequest&)>;

// Installs `hook` for every later request (an empty function: real dialogs) and returns the one
// it replaces. For tests.
DialogHook set_dialog_hook(DialogHook hook);

// A message with an OK button (the hook's answer, else a modal box over `parent`).
void show_error(QWidget* parent, const QString& title, const QString& text);
void show_warning(QWidget* parent, const QString& title, const QString& text);
// "Save changes?" with Save, Discard and Cancel; returns the button chosen (Cancel when closed).
QMessageBox::StandardButton ask_unsaved(QWidget* parent, const QString& text);

}  // namespace attn::gui
