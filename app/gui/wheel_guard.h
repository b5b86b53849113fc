// The mouse wheel over a value widget (combo box, spin box, slider) that does not have keyboard
// focus scrolls the dock it sits in instead of changing the value: moving through a dock full of
// parameter widgets never edits what the pointer passes over. Click (or tab to) a widget to give
// it focus; then the wheel steps its value as usual.
#pragma once

namespace attn::gui {

// Installs the guard on the application once (idempotent); every later widget is covered.
void install_wheel_guard();

}  // namespace attn::gui
