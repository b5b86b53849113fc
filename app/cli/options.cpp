#include "app/cli/options.h"

#include <unistd.h>

#include <cstdio>

#include "app/core/export/figure_data.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::cli {
namespace {

constexpr const char* kDeprecatedTag = "deprecated; use ";

// The descriptor JSON goes to when a verb writes it to stdout: the process's stdout, which
// main() keeps aside (stdout_for_json) so that the verb's tables go to stderr instead.
int g_json_fd = 1;

}  // namespace

std::vector<std::string> split_specs(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  const auto push = [&out](std::string piece) {
    const size_t a = piece.find_first_not_of(" \t\n");
    if (a == std::string::npos) return;
    const size_t b = piece.find_last_not_of(" \t\n");
    out.push_back(piece.substr(a, b - a + 1));
  };
  for (const std::string& v : values) {
    int depth = 0;  // ';' inside a spec's brackets stays (none today; cheap to be safe)
    std::string cur;
    for (char c : v) {
      if (c == '(' || c == '[') ++depth;
      if ((c == ')' || c == ']') && depth > 0) --depth;
      if (c == ';' && depth == 0) {
        push(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    push(cur);
  }
  return out;
}

namespace {
// The specs of the values given, appended; a value list naming none is a usage error.
void append_specs(std::vector<std::string>& specs, const std::vector<std::string>& values) {
  const std::vector<std::string> given = split_specs(values);
  if (given.empty()) throw CLI::ValidationError("-v/--variant lists no variant");
  specs.insert(specs.end(), given.begin(), given.end());
}
}  // namespace

CLI::Option* add_variant_option(CLI::App& cmd, std::vector<std::string>& specs,
                                const std::string& help, const std::string& deprecated) {
  // Both spellings append (CLI11 would let the later option's values replace the earlier's if
  // they shared one vector), so each keeps a list of its own that the callback merges.
  CLI::Option* o = cmd.add_option_function<std::vector<std::string>>(
                          "-v,--variant",
                          [&specs](const std::vector<std::string>& v) { append_specs(specs, v); },
                          help + " (repeatable; ';' separates several in one value)")
                       ->type_name("SPEC");
  if (!deprecated.empty())
    mark_deprecated(
        cmd.add_option_function<std::vector<std::string>>(
            deprecated, [&specs](const std::vector<std::string>& v) { append_specs(specs, v); }),
        "-v/--variant (repeatable)");
  return o;
}

CLI::Option* add_index_list(CLI::App& cmd, const std::string& name, std::vector<int>& out,
                            const std::string& help) {
  return cmd.add_option(name, out, help + " (spaces or commas between them)")
      ->delimiter(',')
      ->type_name("LIST");
}

CLI::Option* add_model_option(CLI::App& cmd, std::string& model, const std::string& extra) {
  std::string names;
  for (const std::string& n : core::default_model_names()) names += (names.empty() ? "" : ", ") + n;
  return cmd
      .add_option("--model", model,
                  "Model folder or embedded model name (" + names +
                      "); default: default-vision for image inputs, else default-text" + extra)
      ->type_name("MODEL");
}

std::string model_or_default(const std::string& model, bool image) {
  if (!model.empty()) return model;
  return image ? "default-vision" : "default-text";
}

CLI::Option* add_json_option(CLI::App& cmd, std::string& path, const std::string& what) {
  return cmd
      .add_option("--json", path,
                  what +
                      " as JSON to FILE, or to stdout when FILE is '-' "
                      "or left out (the tables then go to stderr)")
      ->expected(0, 1)
      ->default_str("-")
      ->type_name("[FILE]");
}

void write_json_output(const std::string& path, const std::string& text) {
  if (path != "-") {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    require(f != nullptr, ErrorCode::Io, path + ": cannot write");
    const bool ok =
        std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fputc('\n', f) != EOF;
    require(std::fclose(f) == 0 && ok, ErrorCode::Io, path + ": write failed");
    return;
  }
  std::fflush(stdout);
  const std::string line = text + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(g_json_fd, line.data() + done, line.size() - done);
    require(n > 0, ErrorCode::Io, "stdout: write failed");
    done += size_t(n);
  }
}

void stdout_for_json() {
  std::fflush(stdout);
  const int saved = ::dup(1);
  if (saved < 0) return;
  g_json_fd = saved;
  ::dup2(2, 1);  // the verb's tables and messages now go where its messages go
}

core::FigureSize FigureSizeOptions::apply(core::FigureSize preset) const {
  if (width > 0) preset.width = width;
  if (height >= 0) preset.height = height;
  if (dpi > 0) preset.dpi = dpi;
  return preset;
}

core::FigureSize figure_size(const FigureSizeOptions& o, const core::FigureData& d,
                             core::FigureSize preset) {
  const core::FigureSize size = o.apply(preset);
  return size.height == 0 ? fig::fit_height(d, size) : size;
}

void add_figure_size_options(CLI::App& cmd, FigureSizeOptions& size) {
  cmd.add_option("--width", size.width, "Figure width in pixels at --dpi (default: the figure's)")
      ->check(CLI::Range(1, 20000));
  cmd.add_option("--height", size.height,
                 "Figure height in pixels (0 = as tall as the content needs; default: the "
                 "figure's)")
      ->check(CLI::Range(0, 20000));
  cmd.add_option("--dpi", size.dpi, "Figure resolution; PDF/SVG pages are width/dpi inches wide")
      ->check(CLI::Range(10.0, 2400.0));
}

CLI::Option* add_quiet_option(CLI::App& cmd, bool& quiet) {
  return cmd.add_flag("-q,--quiet", quiet, "No progress line");
}

CLI::Option* mark_deprecated(CLI::Option* option, const std::string& use) {
  return option->group("")->description(std::string(kDeprecatedTag) + use);
}

void note_deprecated_options(const CLI::App& verb) {
  for (const CLI::Option* o : verb.get_options()) {
    const std::string& d = o->get_description();
    if (o->count() == 0 || d.rfind(kDeprecatedTag, 0) != 0) continue;
    std::fprintf(
        stderr, "attnscope %s: note: %s is deprecated here; use %s\n", verb.get_name().c_str(),
        o->get_lnames().empty() ? o->get_name().c_str() : ("--" + o->get_lnames().front()).c_str(),
        d.substr(std::string(kDeprecatedTag).size()).c_str());
  }
}

}  // namespace attn::cli
