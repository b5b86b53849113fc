// attnscope command line. Exit codes (the rule is in app/cli/usage.h): 0 ok, 1 runtime error,
// 2 usage error.
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/cli/usage.h"
#include "compute/cpu/huge_pages.h"
#include "compute/error.h"
#ifdef ATTN_HAVE_GUI
#include "app/gui/gui_app.h"
#endif

// LeakSanitizer (asan preset): Qt's font database and fontconfig keep allocations until exit
// (render and the figure options). In the executable, not attn_cli, since tests define their own.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libfontconfig\nleak:libQt6Gui\nleak:libQt6Core\nleak:libfreetype\n";
}

int main(int argc, char** argv) {
  using namespace attn::cli;
  attn::cpu::reuse_freed_memory();  // before the first large allocation
#ifdef ATTN_HAVE_GUI
  if (argc == 1) return attn::gui::run_gui(argc, argv, {});
  // `attnscope FILE.attnscope.json` opens the session in the app (the desktop entry's Exec line);
  // a FILE.attnscope-lesson.json plays the lesson.
  if (const std::string arg = argc == 2 ? argv[1] : "";
      arg.size() > 5 && arg[0] != '-' && arg.ends_with(".json")) {
    attn::gui::GuiOptions options;
    (arg.ends_with(".attnscope-lesson.json") ? options.lesson : options.session) = arg;
    return attn::gui::run_gui(1, argv, options);
  }
#endif
  CLI::App app{"attnscope: run, compare and measure attention variants"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attnscope 0.1.0");
  app.footer(kExitCodesHelp);
  Action action;
  const auto commands = add_verbs(app, action);  // the verb table, app/cli/verbs.cpp
#ifdef ATTN_HAVE_GUI
  // The desktop app's verb lives with the GUI (app/gui) and is built only with it.
  attn::gui::add_gui_command(app, action, argc, argv);
#endif
  if (const std::string bad = unknown_command(app, argc, argv); !bad.empty()) {
    std::fprintf(stderr, "attnscope: %s\n", bad.c_str());
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const std::string unknown = unknown_option(app);
    std::fprintf(stderr, "attnscope: usage error: %s\n",
                 unknown.empty() ? e.what() : unknown.c_str());
    return kExitUsage;
  }
  std::string verb = "attnscope";
  for (const CLI::App* sub : app.get_subcommands()) {
    verb += " " + sub->get_name();
    note_deprecated_options(*sub);
    // `--json` without a file (or '-'): the JSON alone on stdout, the verb's tables on stderr.
    const CLI::Option* json = sub->get_option_no_throw("--json");
    if (json && json->count() > 0 && json->as<std::string>() == "-") stdout_for_json();
  }
  try {
    return action ? action() : kExitOk;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: usage error: %s\n", verb.c_str(), e.what());
    return kExitUsage;
  } catch (const attn::Error& e) {
    std::fprintf(stderr, "attnscope: %s: %s\n", attn::error_code_name(e.code()), e.what());
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnscope: error: %s\n", e.what());
    return kExitRuntime;
  }
}
