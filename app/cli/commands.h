// CLI verbs, each a small self-contained command (RenderDoc's renderdoccmd pattern).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace attn::cli {

// A verb registers its options on `app` and stores the action to run when it was chosen.
using Action = std::function<int()>;

void add_variants_command(CLI::App& app, Action& action);
void add_run_command(CLI::App& app, Action& action);
void add_demo_command(CLI::App& app, Action& action);
void add_analyze_command(CLI::App& app, Action& action);
void add_render_command(CLI::App& app, Action& action);
void add_sweep_command(CLI::App& app, Action& action);
void add_stream_command(CLI::App& app, Action& action);
void add_generate_command(CLI::App& app, Action& action);
void add_precision_command(CLI::App& app, Action& action);
void add_heads_command(CLI::App& app, Action& action);
void add_patch_command(CLI::App& app, Action& action);

}  // namespace attn::cli
