#include "app/gui/gui_app.h"

#include <QApplication>
#include <QVersionNumber>
#include <QVulkanInstance>
#include <cstdio>
#include <sstream>

#include "app/gui/vulkan_view.h"

namespace attn::gui {

int run_gui(int argc, char** argv, const GuiOptions& options) {
  // Without a display Qt would abort, and the offscreen platforms cannot show a Vulkan window:
  // say what to do instead (exit 2, as for any usage error).
  const QString platform = qEnvironmentVariable("QT_QPA_PLATFORM");
  const bool headless_platform = platform.startsWith("offscreen") || platform.startsWith("minimal");
  if (headless_platform || (qEnvironmentVariableIsEmpty("DISPLAY") &&
                            qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") && platform.isEmpty())) {
    std::fprintf(stderr,
                 "attnscope: the desktop app needs a display (DISPLAY or WAYLAND_DISPLAY, not "
                 "QT_QPA_PLATFORM=offscreen); for the command line give a verb, see attnscope "
                 "--help\n");
    return 2;
  }
  QApplication::setApplicationName("attnscope");
  QApplication::setOrganizationName("attnscope");
  QApplication::setApplicationVersion("0.1.0");
  QApplication app(argc, argv);
  QVulkanInstance inst;
  inst.setApiVersion(QVersionNumber(1, 1));  // compute shares the view's device (subgroups)
  if (qEnvironmentVariableIsSet("ATTNSCOPE_VK_VALIDATION"))
    inst.setLayers({"VK_LAYER_KHRONOS_validation"});
  if (!inst.create()) {
    std::fprintf(stderr,
                 "attnscope: cannot create a Vulkan instance (error %d); install a Vulkan driver "
                 "(mesa-vulkan-drivers provides a CPU one)\n",
                 int(inst.errorCode()));
    return 1;
  }
  MainWindow w(options);
  w.view()->setVulkanInstance(&inst);
  w.show();
  return app.exec();
}

void add_gui_command(CLI::App& app, std::function<int()>& action, int argc, char** argv) {
  static GuiOptions o;
  static std::string variants;
  auto* cmd = app.add_subcommand("gui", "Open the desktop app (also: attnscope with no verb)");
  cmd->add_option("--model", o.model, "default-text, default-vision, synthetic, or a model folder")
      ->capture_default_str();
  cmd->add_option("--text", o.text, "Initial text");
  cmd->add_option("--text-file", o.text_file, "File holding the initial text (UTF-8)");
  cmd->add_option("--image", o.image, "Initial image (vision models)");
  cmd->add_option("--tensors", o.tensors, "Folder of q.npy, k.npy, v.npy instead of a model");
  cmd->add_option("--tokens", o.synthetic_tokens, "Tokens of the synthetic problem")
      ->capture_default_str();
  cmd->add_option("--session", o.session, "Open a session file (.attnscope.json)");
  cmd->add_option("--layer", o.layer, "Layer shown first")->capture_default_str();
  cmd->add_option("--head", o.head, "Head shown first")->capture_default_str();
  cmd->add_option("--variants", variants, "Up to four variant specs separated by ';'");
  cmd->callback([&action, argc, argv] {
    std::stringstream ss(variants);
    if (!variants.empty()) o.variants.clear();
    for (std::string s; std::getline(ss, s, ';');)
      if (s.find_first_not_of(" \t") != std::string::npos) o.variants.push_back(s);
    // Qt sees only the program name: the verb's options are ours.
    action = [argv] {
      int qargc = 1;
      return run_gui(qargc, argv, o);
    };
    (void)argc;
  });
}

}  // namespace attn::gui
