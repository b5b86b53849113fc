// CLI verbs, each a small command class in app/cli/cmd_<verb>.cpp (RenderDoc's renderdoccmd
// pattern) that owns its options as members, listed once in the verb table (app/cli/verbs.cpp).
// Adding a verb: write cmd_<verb>.cpp defining make_<verb>_command(), add its line to the table.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace attn::cli {

// What main() runs once the command line has parsed: the chosen verb's work; returns the exit
// code (app/cli/usage.h).
using Action = std::function<int()>;

// One verb. The object outlives the parse, so the options bound in add_options stay valid.
class Command {
 public:
  virtual ~Command() = default;
  // Declares the verb's options on its subcommand, bound to the command's members.
  virtual void add_options(CLI::App& cmd) = 0;
  // Checks the parsed command line (UsageError, exit 2) and does the work; returns the exit code.
  virtual int run() = 0;
};

// A row of the verb table.
struct Verb {
  const char* name;         // what the user types: `attnscope <name>`
  const char* description;  // one line, listed by `attnscope --help`
  std::unique_ptr<Command> (*make)();
};

// Every verb, in the order `attnscope --help` lists them.
std::span<const Verb> verbs();

// Adds every verb of the table to `app` as a subcommand; the one chosen on the command line sets
// `action` to its run(). The returned commands hold the options: keep them while `app` parses and
// `action` runs.
std::vector<std::unique_ptr<Command>> add_verbs(CLI::App& app, Action& action);

}  // namespace attn::cli
