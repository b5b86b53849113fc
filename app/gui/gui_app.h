// Entry points of the desktop GUI: `attnscope` with no verb, or `attnscope gui [options]`.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

#include "app/gui/main_window.h"

namespace attn::gui {

// Creates the QApplication and the main window, and runs the event loop. Returns its exit code.
int run_gui(int argc, char** argv, const GuiOptions& options);

// Registers the `gui` verb; the stored action launches the GUI with this process's arguments.
void add_gui_command(CLI::App& app, std::function<int()>& action, int argc, char** argv);

}  // namespace attn::gui
