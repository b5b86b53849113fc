// `attnscope explain-head`: one head's arithmetic step by step on a short text
// (app/core/teaching/head_steps.h): X, Q, K, V, the scores, scaled, masked and softmax matrices,
// the head's output and its contribution through W_o, printed as text tables with the hook each
// one equals, optionally as JSON (every number and its provenance) and as one figure (preset
// "steps").
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/json_file.h"
#include "app/cli/options.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/attribution/attribution_export.h"
#include "app/core/export/data_export.h"
#include "app/core/export/figure_data.h"
#include "app/core/session/model_catalog.h"
#include "app/core/teaching/head_steps.h"
#include "app/figures/figure.h"

namespace attn::cli {

namespace {

constexpr int kTableDims = 8;  // dimension columns a text table prints before "..."

class ExplainHeadCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  struct Options {
    std::string model, text, text_file, variant, json_out, figure;
    FigureSizeOptions size;
    int layer = 0, head = 0, query = -1, threads = 0;
    bool bos = false, quiet = false;
  } o;
};

void ExplainHeadCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model);
  cmd.add_option("--text", o.text, "Input text (a sentence: at most 32 tokens)");
  cmd.add_option("--text-file", o.text_file, "File holding the input text");
  cmd.add_flag("--bos", o.bos, "The model's beginning-of-text token first");
  cmd.add_option("--layer", o.layer, "Layer of the head")->capture_default_str();
  cmd.add_option("--head", o.head, "Query head")->capture_default_str();
  cmd.add_option("-v,--variant", o.variant,
                 "Variant substituted in this head (the mask stage shows what it keeps)");
  cmd.add_option("--query", o.query,
                 "Query position to follow: its arithmetic printed cell by cell and outlined in "
                 "the figure (-1: none)")
      ->capture_default_str();
  cmd.add_option("--figure", o.figure, "The stages as one figure (.png/.svg/.pdf)");
  add_figure_size_options(cmd, o.size);
  add_json_option(cmd, o.json_out, "Write every stage: values, labels, hooks, provenance");
  cmd.add_flag("-q,--quiet", o.quiet, "Print no tables (with --json or --figure)");
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
}

std::string cell(float v, bool dropped) {
  if (dropped) return "   \u00d7   ";
  char b[32];
  std::snprintf(b, sizeof b, "%7.3f", double(v));
  return b;
}

void print_stage(const core::StepStage& s) {
  std::printf("\n%s  %s%s%s\n", s.title.c_str(), s.shape().c_str(),
              s.hook.empty() ? "" : "  = hook ", s.hook.c_str());
  if (!s.note.empty()) std::printf("  %s\n", s.note.c_str());
  const int shown = s.key_columns ? s.cols : std::min(s.cols, kTableDims);
  std::printf("%-14s", "");
  for (int c = 0; c < shown; ++c) {
    std::string l = s.col_labels[size_t(c)];
    if (l.size() > 7) l = l.substr(0, 7);
    std::printf(" %7s", l.c_str());
  }
  if (shown < s.cols) std::printf("  ... (%d more)", s.cols - shown);
  std::printf("\n");
  for (int r = 0; r < s.rows; ++r) {
    // The label padded to 14 characters (UTF-8: continuation bytes take no column).
    std::string l;
    int width = 0;
    for (char ch : s.row_labels[size_t(r)]) {
      const bool starts = (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
      if (starts && width == 14) break;
      width += starts ? 1 : 0;
      l += ch;
    }
    std::printf("%s%*s", l.c_str(), 14 - width, "");
    for (int c = 0; c < shown; ++c)
      std::printf(" %s", cell(s.at(r, c), s.is_dropped(r, c)).c_str());
    if (shown < s.cols) std::printf("  ...");
    std::printf("\n");
  }
}

nlohmann::json stage_json(const core::StepStage& s) {
  nlohmann::json j;
  j["id"] = s.id;
  j["title"] = s.title;
  j["hook"] = s.hook;
  j["note"] = s.note;
  j["shape"] = {s.rows, s.cols};
  j["key_columns"] = s.key_columns;
  j["row_labels"] = s.row_labels;
  j["col_labels"] = s.col_labels;
  nlohmann::json values = nlohmann::json::array(), how = nlohmann::json::array();
  for (int r = 0; r < s.rows; ++r) {
    nlohmann::json row = nlohmann::json::array(), hrow = nlohmann::json::array();
    for (int c = 0; c < s.cols; ++c) {
      // A masked-out score is null: it has no value (the hook holds -inf for the causal ones);
      // its weight is a real 0.
      if (s.is_dropped(r, c) && s.id == "masked") {
        row.push_back(nullptr);
      } else {
        row.push_back(double(s.at(r, c)));
      }
      hrow.push_back(s.how[s.index(r, c)]);
    }
    values.push_back(std::move(row));
    how.push_back(std::move(hrow));
  }
  j["values"] = std::move(values);
  if (!s.dropped.empty()) {
    nlohmann::json dropped = nlohmann::json::array();
    for (int r = 0; r < s.rows; ++r) {
      nlohmann::json row = nlohmann::json::array();
      for (int c = 0; c < s.cols; ++c) row.push_back(s.is_dropped(r, c) ? 1 : 0);
      dropped.push_back(std::move(row));
    }
    j["dropped"] = std::move(dropped);
  }
  j["how"] = std::move(how);
  return j;
}

int ExplainHeadCommand::run() {
  if (!o.json_out.empty()) core::check_output_path(o.json_out);
  check_figure_option(o.figure);
  usage(!o.text.empty() || !o.text_file.empty(), "give a short input: --text or --text-file");
  usage(o.text.empty() || o.text_file.empty(), "give --text or --text-file, not both");
  o.model = model_or_default(o.model);
  check_model_path(o.model, o.model);
  if (!o.variant.empty()) check_variant_specs({o.variant}, "--variant");
  const std::shared_ptr<const core::Model> model = core::cached_model(o.model);
  const core::ModelInfo& info = model->info();
  usage(!info.vision, o.model + " is a vision model: explain-head shows a text model's head");
  usage(o.layer >= 0 && o.layer < info.n_layers,
        "--layer " + std::to_string(o.layer) + " is outside the model's " +
            std::to_string(info.n_layers) + " layers (0.." + std::to_string(info.n_layers - 1) +
            ")");
  usage(o.head >= 0 && o.head < info.n_heads,
        "--head " + std::to_string(o.head) + " is outside the model's " +
            std::to_string(info.n_heads) + " query heads (0.." + std::to_string(info.n_heads - 1) +
            ")");
  const std::string text = o.text_file.empty() ? o.text : read_text_file(o.text_file);
  const core::ModelInput in = core::attribution_text_input(
      *model, text, o.text_file.empty() ? "--text" : "--text-file " + o.text_file, nullptr, o.bos);
  const int n = int(in.ids.size());
  usage(core::head_steps_refusal(n).empty(), core::head_steps_refusal(n));
  usage(o.query >= -1 && o.query < n, "--query " + std::to_string(o.query) +
                                          " is outside the input's " + std::to_string(n) +
                                          " positions (0.." + std::to_string(n - 1) + ")");
  const core::HeadSteps s = core::head_steps(
      *model, in, {.layer = o.layer, .head = o.head, .variant = o.variant, .threads = o.threads});

  if (!o.quiet) {
    std::printf(
        "layer %d, head %d%s of %s \u00b7 %s \u00b7 %d tokens \u00b7 d = %d, hidden %d\n", s.layer,
        s.head,
        s.n_kv_heads != s.n_heads ? (" (KV head " + std::to_string(s.kv_head) + ")").c_str() : "",
        o.model.c_str(), s.variant.c_str(), s.n, s.d, s.hidden);
    for (const core::StepStage& st : s.stages) print_stage(st);
    if (o.query >= 0) {
      std::printf("\nQuery %s, cell by cell:\n", s.tokens[size_t(o.query)].c_str());
      for (const char* id : {"scores", "scaled", "masked", "weights"}) {
        const core::StepStage& st = s.stage(id);
        std::printf("\n%s:\n", st.title.c_str());
        for (int j = 0; j < st.cols; ++j)
          std::printf("  [%s] %s\n", st.col_labels[size_t(j)].c_str(),
                      st.how[st.index(o.query, j)].c_str());
      }
    }
  }
  if (!o.json_out.empty()) {
    nlohmann::json j;
    j["model"] = o.model;
    j["text"] = text;
    j["family"] = s.family;
    j["layer"] = s.layer;
    j["head"] = s.head;
    j["kv_head"] = s.kv_head;
    j["n_heads"] = s.n_heads;
    j["n_kv_heads"] = s.n_kv_heads;
    j["d"] = s.d;
    j["hidden"] = s.hidden;
    j["scale"] = s.scale;
    j["causal"] = s.causal;
    j["variant"] = s.variant;
    j["normaliser"] = s.normaliser;
    j["ids"] = in.ids;
    j["tokens"] = s.tokens;
    nlohmann::json stages = nlohmann::json::array();
    for (const core::StepStage& st : s.stages) stages.push_back(stage_json(st));
    j["stages"] = std::move(stages);
    write_json_file(o.json_out, j);
  }
  if (!o.figure.empty()) {
    const core::FigureData fd = core::steps_figure(s, o.model, o.query);
    fig::export_figure(fd, o.figure, figure_size(o.size, fd, {3600, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
  }
  return kExitOk;
}

}  // namespace

std::unique_ptr<Command> make_explain_head_command() {
  return std::make_unique<ExplainHeadCommand>();
}

}  // namespace attn::cli
