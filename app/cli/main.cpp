// attnscope command line: exit codes 0 = ok, 1 = runtime error, 2 = usage error.
#include <cstdio>

#include "app/cli/commands.h"
#include "compute/error.h"

int main(int argc, char** argv) {
  CLI::App app{"attnscope: run, compare and measure attention variants"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "attnscope 0.1.0");
  attn::cli::Action action;
  attn::cli::add_variants_command(app, action);
  attn::cli::add_run_command(app, action);
  attn::cli::add_demo_command(app, action);
  attn::cli::add_analyze_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return action ? action() : 0;
  } catch (const attn::Error& e) {
    std::fprintf(stderr, "attnscope: %s: %s\n", attn::error_code_name(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnscope: error: %s\n", e.what());
    return 1;
  }
}
