#include "app/gui/gui_app.h"

#include <QApplication>
#include <QSocketNotifier>
#include <QTimer>
#include <QVersionNumber>
#include <QVulkanInstance>
#include <csignal>
#include <cstdio>
#ifdef __linux__
#include <sys/socket.h>
#include <unistd.h>
#endif

#include "app/cli/options.h"
#include "app/cli/usage.h"
#include "app/gui/job_runner.h"
#include "app/gui/vulkan_view.h"
#include "compute/registry.h"

namespace attn::gui {
namespace {

#ifdef __linux__
int g_signal_fds[2] = {-1, -1};

// Async-signal-safe: one byte into the socket pair; the event loop does the rest.
void on_terminate_signal(int sig) {
  const char c = char(sig);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_fds[0], &c, 1);
}

// SIGTERM and SIGINT close the window as the user would (the autosave is removed, the layout
// saved): only a crash or SIGKILL leaves the autosave that the next start offers to recover.
void close_on_terminate_signals(MainWindow& w) {
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, g_signal_fds) != 0) return;
  auto* notifier = new QSocketNotifier(g_signal_fds[1], QSocketNotifier::Read, &w);
  QObject::connect(notifier, &QSocketNotifier::activated, &w, [&w, notifier] {
    notifier->setEnabled(false);
    char c;
    [[maybe_unused]] const ssize_t n = ::read(g_signal_fds[1], &c, 1);
    w.close_without_asking();  // no question: unsaved changes stay in the autosave
    QApplication::quit();
  });
  struct sigaction sa = {};
  sa.sa_handler = on_terminate_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}
#else
void close_on_terminate_signals(MainWindow&) {}
#endif

}  // namespace

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
  int rc = 0;
  {
    MainWindow w(options);
    w.view()->setVulkanInstance(&inst);
    close_on_terminate_signals(w);
    w.show();
    rc = app.exec();
  }
  // A job still finishing after its window went away (it was cancelled) ends before the
  // application and the statics it may use do.
  JobRunner::wait_for_detached(2000);
  return rc;
}

void add_gui_command(CLI::App& app, std::function<int()>& action, int argc, char** argv) {
  static GuiOptions o;
  static std::vector<std::string> variants, old_variants;
  auto* cmd = app.add_subcommand("gui", "Open the desktop app (also: attnscope with no verb)");
  auto* model = cmd->add_option("--model", o.model,
                                "Model folder or embedded model name (default-text, teaching-text, "
                                "default-vision) or synthetic; default: default-vision for image "
                                "inputs, else default-text")
                    ->type_name("MODEL");
  cmd->add_option("--text", o.text, "Initial text");
  cmd->add_option("--text-file", o.text_file, "File holding the initial text (UTF-8)");
  cmd->add_option("--image", o.image, "Initial image (vision models)");
  cmd->add_option("--tensors", o.tensors, "Folder of q.npy, k.npy, v.npy instead of a model");
  cmd->add_option("--tokens", o.synthetic_tokens, "Tokens of the synthetic problem")
      ->capture_default_str();
  cmd->add_option("--session", o.session, "Open a session file (.attnscope.json)");
  cmd->add_option("--lesson", o.lesson,
                  "Play a lesson file (.attnscope-lesson.json; built-in ones: Help > Lessons)");
  cmd->add_option("--layer", o.layer, "Layer shown first")->capture_default_str();
  cmd->add_option("--head", o.head, "Head shown first")->capture_default_str();
  // The CLI grammar's spelling (app/cli/options.h); --variants "a;b" is the old one, hidden and
  // noted as deprecated by main().
  cmd->add_option("-v,--variant", variants,
                  "Variant spec shown beside dense (repeatable, up to 4; ';' separates several "
                  "in one value)")
      ->type_name("SPEC");
  cli::mark_deprecated(cmd->add_option("--variants", old_variants), "-v/--variant (repeatable)");
  cmd->callback([&action, argc, argv, model] {
    if (model->count() == 0 && !o.image.empty()) o.model = "default-vision";
    std::vector<std::string> given = variants;
    given.insert(given.end(), old_variants.begin(), old_variants.end());
    if (!given.empty()) o.variants = cli::split_specs(given);
    // Qt sees only the program name: the verb's options are ours.
    action = [argv] {
      // Said before any window opens: a spec the app would refuse is a usage error (exit 2).
      cli::usage(o.variants.size() <= 4, "-v/--variant: at most 4 variants (got " +
                                             std::to_string(o.variants.size()) + ")");
      for (const std::string& spec : o.variants) {
        try {
          (void)make_variant(spec);
        } catch (const Error& e) {
          throw cli::UsageError("-v/--variant: '" + spec + "': " + e.what());
        }
      }
      int qargc = 1;
      return run_gui(qargc, argv, o);
    };
    (void)argc;
  });
}

}  // namespace attn::gui
