#include "app/cli/usage.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/backend.h"
#include "compute/kv/kv_policy.h"
#include "compute/registry.h"

namespace attn::cli {

const char* const kExitCodesHelp =
    "Exit codes: 0 ok; 1 runtime error (missing or corrupt file, I/O, device); 2 usage error "
    "(no or conflicting inputs, malformed spec, unknown verb, variant, parameter or backend, "
    "layer or head out of range, text model given an image or the reverse).";

void check_variant_specs(const std::vector<std::string>& specs, const std::string& option) {
  for (const std::string& spec : specs) {
    try {
      make_variant(spec);
    } catch (const Error& e) {
      throw UsageError(option + ": " + e.what(), e.code());
    }
  }
}

void check_kv_policies(const std::vector<std::string>& specs, const std::string& option) {
  for (const std::string& spec : specs) {
    try {
      make_kv_policy(spec);
    } catch (const Error& e) {
      throw UsageError(option + ": " + e.what());
    }
  }
}

void check_backend(const std::string& name) {
  const std::vector<std::string> known = backend_names();
  for (const std::string& k : known)
    if (k == name) return;
  throw UsageError("unknown backend '" + name + "'" + did_you_mean(name, known) +
                   " (known: " + join_names(known) + ")");
}

void check_model_path(const std::string& name, const std::string& path) {
  if (core::is_default_model_name(name)) return;
  std::error_code ec;
  require(std::filesystem::exists(path, ec), ErrorCode::Io, core::missing_model_message(name));
}

std::string unknown_command(const CLI::App& app, int argc, const char* const* argv) {
  std::string word;
  for (int i = 1; i < argc && word.empty(); ++i)
    if (argv[i][0] != '-') word = argv[i];  // the top level has flags only (--help, --version)
  if (word.empty()) return "";
  std::vector<std::string> verbs;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return "";
    verbs.push_back(sub->get_name());
  }
  return "unknown command '" + word + "'" + did_you_mean(word, verbs) +
         " (commands: " + join_names(verbs) + ")";
}

std::string unknown_option(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const std::string& arg : sub->remaining(false)) {
      if (arg.size() < 2 || arg[0] != '-') continue;
      const std::string name = arg.substr(0, arg.find('='));
      std::vector<std::string> known;
      for (const CLI::Option* o : sub->get_options()) {
        for (const std::string& l : o->get_lnames()) known.push_back("--" + l);
        for (const std::string& s : o->get_snames()) known.push_back("-" + s);
      }
      return "unknown option '" + name + "' of " + sub->get_name() + did_you_mean(name, known);
    }
  }
  return "";
}

void check_figure_option(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  try {
    fig::check_figure_path(path);
  } catch (const Error& e) {
    throw UsageError(option + ": " + e.what(), e.code());
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open text file");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace attn::cli
