// attnscope command line. Exit codes (the rule is in app/cli/usage.h): 0 ok, 1 runtime error,
// 2 usage error.
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/usage.h"
#include "compute/error.h"
#ifdef ATTN_HAVE_GUI
#include "app/gui/gui_app.h"
#endif

int main(int argc, char** argv) {
  using namespace attn::cli;
#ifdef ATTN_HAVE_GUI
  if (argc == 1) return attn::gui::run_gui(argc, argv, {});
  // `attnscope FILE.attnscope.json` opens the session in the app (the desktop entry's Exec line).
  if (const std::string arg = argc == 2 ? argv[1] : "";
      arg.size() > 5 && arg[0] != '-' && arg.ends_with(".json")) {
    attn::gui::GuiOptions options;
    options.session = arg;
    return attn::gui::run_gui(1, argv, options);
  }
#endif
  CLI::App app{"attnscope: run, compare and measure attention variants"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attnscope 0.1.0");
  app.footer(kExitCodesHelp);
  Action action;
  add_variants_command(app, action);
  add_run_command(app, action);
  add_demo_command(app, action);
  add_analyze_command(app, action);
  add_render_command(app, action);
  add_sweep_command(app, action);
  add_stream_command(app, action);
  add_generate_command(app, action);
  add_precision_command(app, action);
  add_heads_command(app, action);
  add_patch_command(app, action);
#ifdef ATTN_HAVE_GUI
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
    std::fprintf(stderr, "attnscope: usage error: %s\n", e.what());
    return kExitUsage;
  }
  std::string verb = "attnscope";
  for (const CLI::App* sub : app.get_subcommands()) verb += " " + sub->get_name();
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
