// `attnscope heads`: the head-role atlas (app/core/heads/head_atlas.h) of a text model over a text,
// a dataset or the repeated random sequences alone, as a table, JSON and a figure.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/cli/commands.h"
#include "app/cli/json_file.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/analysis/sweep.h"
#include "app/core/analysis/views.h"
#include "app/core/datasets/text_dataset.h"
#include "app/core/export/data_export.h"
#include "app/core/heads/atlas_shard.h"
#include "app/core/heads/head_atlas.h"
#include "app/core/heads/head_roles.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open text file");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string cell(double x) {
  return std::isfinite(x) ? fixed(x, 3) : "-";
}

struct Report {
  std::string model, json_out, figure, ablation_figure;
  std::vector<std::string> roles;
  FigureSizeOptions size;
};

// The tables, JSON and figures of an atlas (and its ablation scan), from one run or merged shards.
void report(const core::HeadAtlas& a, const core::AblationScan* scan, const Report& o) {
  std::printf(
      "%s: %d layers x %d heads; %d text windows of %d tokens (%d text tokens), %d "
      "repeated sequences of %d; %.2f s\n",
      a.model.c_str(), a.n_layers, a.n_heads, a.windows, a.window_tokens, a.text_tokens, a.repeats,
      a.repeat_length, a.seconds);
  if (std::isfinite(a.text_loss))
    std::printf(
        "next-token loss %.4f (perplexity %.2f): %s (%d windows, %d predicted tokens; a "
        "window is BOS + its text, cut to --window)\n",
        a.text_loss, std::exp(a.text_loss), core::kLossScope, a.windows, a.predicted_tokens);
  const auto& roles = core::head_roles();
  Table best({"role", "best head", "score", "95% interval", "samples"});
  for (size_t r = 0; r < roles.size(); ++r) {
    int b = -1;
    for (int i = 0; i < a.n_layers * a.n_heads; ++i)
      if (std::isfinite(a.mean[r][size_t(i)]) &&
          (b < 0 || a.mean[r][size_t(i)] > a.mean[r][size_t(b)]))
        b = i;
    if (b < 0) {
      best.add({roles[r].name, "-", "-", "-", std::to_string(a.samples[r])});
      continue;
    }
    best.add({roles[r].name,
              "L" + std::to_string(b / a.n_heads) + "H" + std::to_string(b % a.n_heads),
              cell(a.mean[r][size_t(b)]),
              "[" + cell(a.lo[r][size_t(b)]) + ", " + cell(a.hi[r][size_t(b)]) + "]",
              std::to_string(a.samples[r])});
  }
  best.print();
  // Every head: one row per layer and head, one column per role.
  std::vector<std::string> header = {"head"};
  for (const core::HeadRole& r : roles) header.push_back(r.name);
  Table all(header);
  for (int l = 0; l < a.n_layers; ++l)
    for (int h = 0; h < a.n_heads; ++h) {
      std::vector<std::string> row = {"L" + std::to_string(l) + "H" + std::to_string(h)};
      for (size_t r = 0; r < roles.size(); ++r)
        row.push_back(cell(a.mean[r][size_t(l) * a.n_heads + h]));
      all.add(row);
    }
  all.print();
  nlohmann::json j = core::atlas_json(a);
  if (scan) {
    std::printf(
        "%s ablation of each head alone over %d windows (loss without ablation %.4f, the same "
        "mean over the same windows as above):\n",
        scan->mode.c_str(), scan->windows, scan->loss);
    Table t({"head", "loss rise", "95% interval"});
    for (int i = 0; i < scan->n_layers * scan->n_heads; ++i)
      t.add({"L" + std::to_string(i / scan->n_heads) + "H" + std::to_string(i % scan->n_heads),
             fixed(scan->delta[size_t(i)], 4),
             "[" + fixed(scan->lo[size_t(i)], 4) + ", " + fixed(scan->hi[size_t(i)], 4) + "]"});
    t.print();
    j["ablation"] = core::ablation_json(*scan);
    if (!o.ablation_figure.empty()) {
      const core::FigureData fd = core::ablation_figure(*scan, o.model);
      fig::export_figure(fd, o.ablation_figure, figure_size(o.size, fd, {2100, 0, 300}));
      std::fprintf(stderr, "wrote %s\n", o.ablation_figure.c_str());
    }
  }
  if (!o.json_out.empty()) write_json_file(o.json_out, j);
  if (!o.figure.empty()) {
    const core::FigureData fd = core::atlas_figure(a, o.roles);
    fig::export_figure(fd, o.figure, figure_size(o.size, fd, {2100, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
  }
}

class HeadsCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  // The command line's own mistakes that need no model.
  void check_options() const;
  // --merge: the shard files joined and reported as one run.
  int merge() const;
  // The texts the windows come from: --dataset's records, or --text / --text-file.
  std::vector<std::string> texts() const;
  // A shard's samples written to --json for --merge.
  void write_shard(const core::AtlasShard& part, size_t items, int n_items, size_t windows) const;

  struct Options {
    std::string model, text, text_file, dataset, json_out, figure, ablate_each, ablation_figure,
        shard;
    std::vector<std::string> roles, merge;
    core::AtlasOptions a;
    FigureSizeOptions size;
  } o;  // bound by add_options
};

void HeadsCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model, "; not with --merge");
  auto* text = cmd.add_option("--text", o.text, "Text the windows come from");
  auto* file = cmd.add_option("--text-file", o.text_file, "File holding the text (UTF-8)");
  auto* data = cmd.add_option("--dataset", o.dataset,
                              "JSONL of {\"text\": ...} records or a folder of .txt files: one "
                              "window per record");
  text->excludes(file)->excludes(data);
  file->excludes(data);
  cmd.add_option("--window", o.a.window, "Tokens per text window, BOS included")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  cmd.add_option("--windows", o.a.windows, "Evenly spaced windows of one text")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--repeat-length", o.a.repeat_length, "Length of R in BOS + R + R")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  cmd.add_option("--repeats", o.a.repeat_sequences, "Repeated random sequences (0 = none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--seed", o.a.seed, "Seed of the random sequences and the bootstrap")
      ->capture_default_str();
  cmd.add_option("--long-range", o.a.long_range, "Distance D of the long-range role")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  cmd.add_option("--bootstrap", o.a.bootstrap, "Bootstrap resamples of the 95% intervals")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd.add_option("--ablate-each", o.ablate_each,
                 "Also ablate each head alone on every text window and report the rise of the "
                 "next-token loss: zero, mean (over the window's positions) or corpus-mean (over "
                 "every window's positions)")
      ->check(CLI::IsMember({"zero", "mean", "corpus-mean"}));
  cmd.add_option("--ablation-figure", o.ablation_figure,
                 "With --ablate-each: the loss rise per layer x head (.png/.svg/.pdf)");
  std::string role_help = "Roles the figure shows (default all). ";
  for (const core::HeadRole& r : core::head_roles())
    role_help += r.name + ": " + r.definition + "; ";
  role_help += "(the head grid's max-token mass and sink count use another rule: " +
               std::string(core::kSinkRule) + ")";
  cmd.add_option("--roles", o.roles, role_help)->delimiter(',');
  cmd.add_option("--threads", o.a.threads, "Worker threads (0 = all)");
  add_json_option(cmd, o.json_out,
                  "Write every role's [layer][head] means and intervals (with --shard: the "
                  "shard's samples, for --merge)");
  auto* shard = cmd.add_option("--shard", o.shard,
                               "Run shard i of n (0-based): every n-th window and sequence, "
                               "written to --json for --merge");
  auto* merge = cmd.add_option("--merge", o.merge,
                               "Join the --json files of --shard runs and report them as one run");
  shard->excludes(merge);
  cmd.add_option("--figure", o.figure, "One layer x head panel per role (.png/.svg/.pdf)");
  add_figure_size_options(cmd, o.size);
}

int HeadsCommand::run() {
  check_options();
  if (!o.merge.empty()) return merge();
  o.model = model_or_default(o.model);
  usage(!o.text.empty() || !o.text_file.empty() || !o.dataset.empty() || o.a.repeat_sequences > 0,
        "give the text: --text, --text-file or --dataset (or only --repeats for the "
        "induction probes)");
  usage(o.ablation_figure.empty() || !o.ablate_each.empty(),
        "--ablation-figure draws the --ablate-each scan: give --ablate-each too");
  core::Shard shard;
  if (!o.shard.empty()) {
    try {
      shard = core::parse_shard(o.shard);
    } catch (const Error& e) {
      throw UsageError(std::string("--shard: ") + e.what());
    }
    usage(!o.json_out.empty(),
          "--shard writes its samples to --json, for heads --merge: give --json");
  }
  check_model_path(o.model, o.model);
  std::shared_ptr<const core::Model> model = core::cached_model(o.model);
  usage(!model->info().vision,
        "--model " + o.model + " is a vision model: head roles are measured on text");
  // Every shard builds the whole input (it is deterministic) and runs its own part of it.
  const core::AtlasInput in = core::atlas_input(*model, texts(), o.a);
  usage(o.ablate_each.empty() || !in.windows.empty(),
        "--ablate-each needs text windows (--text, --text-file or --dataset)");
  const int n_items = int(in.windows.size() + in.repeats.size());
  const std::vector<int> items = core::shard_items(n_items, shard);
  const std::vector<int> windows = core::shard_items(int(in.windows.size()), shard);
  usage(!items.empty(), "--shard " + o.shard + " owns none of the " + std::to_string(n_items) +
                            " windows and sequences");
  core::AtlasOptions ao = o.a;
  if (isatty(fileno(stderr)))
    ao.progress = [](int done, int total) {
      std::fprintf(stderr, "\rforward passes: %d / %d", done, total);
      if (done >= total) std::fprintf(stderr, "\n");
    };
  core::AtlasShard part;
  part.atlas = core::collect_atlas(*model, o.model, in, ao, &items);
  if (!o.ablate_each.empty())
    part.ablation = core::ablation_samples(
        *model, in.windows,
        core::ablation_mode(o.ablate_each == "corpus-mean" ? "mean" : o.ablate_each), o.a.threads,
        o.ablate_each == "corpus-mean", &windows);
  if (!o.shard.empty()) {
    write_shard(part, items.size(), n_items, windows.size());
    return kExitOk;
  }
  const core::HeadAtlas a = core::summarize_atlas(part.atlas, o.a.bootstrap);
  std::optional<core::AblationScan> scan;
  if (part.ablation) scan = core::summarize_ablation(*part.ablation, o.a.bootstrap, o.a.seed);
  report(a, scan ? &*scan : nullptr,
         {o.model, o.json_out, o.figure, o.ablation_figure, o.roles, o.size});
  return kExitOk;
}

void HeadsCommand::check_options() const {
  for (const std::string& r : o.roles) {
    try {
      core::head_role_index(r);
    } catch (const Error& e) {
      throw UsageError(std::string("--roles: ") + e.what());
    }
  }
  for (const auto& [opt, path] :
       {std::pair{"--figure", o.figure}, {"--ablation-figure", o.ablation_figure}}) {
    if (path.empty()) continue;
    usage(o.shard.empty(),
          std::string(opt) + " draws the whole run: give it to heads --merge, not --shard");
    check_figure_option(path, opt);
  }
  if (!o.json_out.empty()) core::check_output_path(o.json_out);
}

int HeadsCommand::merge() const {
  usage(o.model.empty() && o.text.empty() && o.text_file.empty() && o.dataset.empty() &&
            o.ablate_each.empty(),
        "--merge joins the files of heads --shard runs: the model, text and ablation are in "
        "them; give only the files and the report options");
  std::vector<core::AtlasShard> shards;
  for (const std::string& f : o.merge)
    shards.push_back(core::atlas_shard_from_json(read_shard_json(f), f));
  const core::AtlasShard m = core::merge_atlas_shards(shards);
  const core::HeadAtlas a = core::summarize_atlas(m.atlas, o.a.bootstrap);
  std::optional<core::AblationScan> scan;
  if (m.ablation) scan = core::summarize_ablation(*m.ablation, o.a.bootstrap, m.atlas.seed);
  usage(o.ablation_figure.empty() || scan,
        "--ablation-figure: the shards ran no ablation scan (--ablate-each)");
  report(a, scan ? &*scan : nullptr,
         {a.model, o.json_out, o.figure, o.ablation_figure, o.roles, o.size});
  return kExitOk;
}

std::vector<std::string> HeadsCommand::texts() const {
  std::vector<std::string> texts;
  if (!o.dataset.empty()) {
    for (core::TextRecord& r : core::read_text_dataset(o.dataset))
      texts.push_back(std::move(r.text));
  } else if (!o.text_file.empty() || !o.text.empty()) {
    texts.push_back(o.text_file.empty() ? o.text : read_file(o.text_file));
  }
  return texts;
}

// `items` of the `n_items` windows and sequences, `windows` of them ablated.
void HeadsCommand::write_shard(const core::AtlasShard& part, size_t items, int n_items,
                               size_t windows) const {
  write_json_file(o.json_out, core::atlas_shard_json(part));
  std::fprintf(stderr,
               "wrote %s (shard %s: %zu of %d windows and sequences%s; join with heads "
               "--merge)\n",
               o.json_out.c_str(), o.shard.c_str(), items, n_items,
               part.ablation ? (", " + std::to_string(windows) + " ablated windows").c_str() : "");
}

}  // namespace

std::unique_ptr<Command> make_heads_command() {
  return std::make_unique<HeadsCommand>();
}

}  // namespace attn::cli
