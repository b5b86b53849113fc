// The one command-line grammar of attnscope's verbs: every concept that several verbs take is
// declared here once, so it is spelt, typed and documented the same in each of them.
//
//   -v, --variant SPEC   a variant spec; repeatable, and ';' separates several in one value
//   --heads LIST         which query heads (a list, spaces or commas); --n-heads N a count
//   --layers LIST        which layers (a list, spaces or commas)
//   --ids LIST           token ids (spaces or commas)
//   --model M            a model folder or embedded model name; optional everywhere: the
//                        session's model, else default-vision for image inputs, else default-text
//   --json [FILE]        write JSON to FILE, or to stdout when FILE is '-' or left out
//   --width/--height/--dpi  the size of every figure a verb writes
//   -q, --quiet          no progress line
//
// Old spellings keep working as hidden options that print a deprecation note on stderr
// (note_deprecated_options, called once the command line has parsed).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "app/core/session/session.h"

namespace attn::core {
struct FigureData;
}

namespace attn::cli {

// ---- variants ------------------------------------------------------------------------------
// `-v, --variant SPEC` (repeatable; a value may hold several specs separated by ';') bound to
// `specs`. `deprecated` (e.g. "--variants") adds the old spelling, which appends to the same list.
CLI::Option* add_variant_option(CLI::App& cmd, std::vector<std::string>& specs,
                                const std::string& help, const std::string& deprecated = "");
// The specs split at ';' (outside brackets), trimmed, empty pieces dropped.
std::vector<std::string> split_specs(const std::vector<std::string>& values);

// ---- lists ---------------------------------------------------------------------------------
// `--heads LIST` / `--layers LIST`: indices separated by spaces or commas.
CLI::Option* add_index_list(CLI::App& cmd, const std::string& name, std::vector<int>& out,
                            const std::string& help);

// ---- model ---------------------------------------------------------------------------------
// `--model M`, optional, with the one help text.
CLI::Option* add_model_option(CLI::App& cmd, std::string& model, const std::string& extra = "");
// The model a verb runs when --model was not given: `image` inputs take default-vision, the
// rest default-text. A given model is returned unchanged.
std::string model_or_default(const std::string& model, bool image = false);

// ---- JSON ----------------------------------------------------------------------------------
// `--json [FILE]`: FILE, or "-" (stdout) when the option is given without one.
CLI::Option* add_json_option(CLI::App& cmd, std::string& path, const std::string& what);
// Writes `text` (a JSON document) to `path`, "-" meaning stdout. Throws Error(Io).
void write_json_output(const std::string& path, const std::string& text);
// Called by main() when the verb writes its JSON to stdout: stdout is kept for the JSON alone
// and everything else the verb prints goes to stderr, so `attnscope X --json | jq` works.
void stdout_for_json();

// ---- figures -------------------------------------------------------------------------------
// `--width`, `--height`, `--dpi` of the figures a verb writes; unset values keep the verb's
// preset (a height of 0 lays the figure out at its natural height).
struct FigureSizeOptions {
  int width = 0;    // 0 = the preset's
  int height = -1;  // -1 = the preset's
  double dpi = 0;   // 0 = the preset's
  bool height_given() const { return height >= 0; }
  core::FigureSize apply(core::FigureSize preset) const;
};
void add_figure_size_options(CLI::App& cmd, FigureSizeOptions& size);
// The size a verb writes `d` at: `preset` with the given options over it, and a height of 0
// replaced by the height the content needs at that width (fig::fit_height).
core::FigureSize figure_size(const FigureSizeOptions& o, const core::FigureData& d,
                             core::FigureSize preset);

// ---- progress ------------------------------------------------------------------------------
CLI::Option* add_quiet_option(CLI::App& cmd, bool& quiet);

// ---- old spellings -------------------------------------------------------------------------
// A hidden option `name` bound by the caller; `use` names what replaces it in the note.
CLI::Option* mark_deprecated(CLI::Option* option, const std::string& use);
// For each deprecated option given on the parsed command line of `verb`: one note on stderr,
// "attnscope run: note: --heads is deprecated here; use --n-heads".
void note_deprecated_options(const CLI::App& verb);

}  // namespace attn::cli
