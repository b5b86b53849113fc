#include "gui_test_main.h"

#include <gtest/gtest.h>

#include <QApplication>
#include <QVersionNumber>
#include <cstdio>

#include "app/gui/dialogs.h"
#include "app/gui/job_runner.h"

namespace attn::gui::test {

int run_gui_tests(int argc, char** argv, const char* name, QVulkanInstance** instance,
                  const std::function<int()>& instead) {
  ::testing::InitGoogleTest(&argc, argv);
  QApplication::setApplicationName("attnscope-test");
  QApplication app(argc, argv);
  QVulkanInstance inst;
  inst.setApiVersion(QVersionNumber(1, 1));
  if (!inst.create()) {
    std::fprintf(stderr, "%s: no Vulkan instance (error %d)\n", name, int(inst.errorCode()));
    return 1;
  }
  *instance = &inst;
  // A window a test closes with edits in it goes without the unsaved changes question, as a test
  // that wants the question answers it itself (set_dialog_hook); other messages show as boxes.
  set_dialog_hook([](const DialogRequest& r) {
    return r.kind == "unsaved" ? QMessageBox::Discard : QMessageBox::NoButton;
  });
  int rc = instead ? instead() : -1;
  if (rc < 0) rc = RUN_ALL_TESTS();
  JobRunner::wait_for_detached(10000);
  *instance = nullptr;
  return rc;
}

}  // namespace attn::gui::test
