// The main() of the GUI test binaries: gtest's and Qt's set-up and a Vulkan 1.1 instance for the
// windows, then every test. Windows closed with unsaved changes close without the question
// (Discard); a test that wants it answers it through set_dialog_hook (app/gui/dialogs.h).
#pragma once
#include <QVulkanInstance>
#include <functional>

namespace attn::gui::test {

// Runs the tests of binary `name` with the instance in `*instance` while they run, or `instead`
// when it is given and returns an exit code (>= 0). Jobs still finishing in the background are
// waited for before the instance goes.
int run_gui_tests(int argc, char** argv, const char* name, QVulkanInstance** instance,
                  const std::function<int()>& instead = {});

}  // namespace attn::gui::test
