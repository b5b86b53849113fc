// `attnscope patch`: activation patching on a clean/corrupt pair (app/core/heads/interventions.h),
// over heads (layer x head) or positions (layer x position), as a table, JSON and a figure.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/json_file.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/analysis/sweep.h"
#include "app/core/datasets/text_dataset.h"
#include "app/core/export/data_export.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::cli {

namespace {

class PatchCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  void check_outputs() const;
  // --merge: the shard files joined; takes the model, dataset and --over from them.
  core::PatchResult merge();
  // --dataset: mean effects over the pairs (this shard's, with --shard).
  core::PatchResult patch_dataset(const core::Model& model, const core::PatchOptions& po) const;
  // One pair: --clean, --corrupt, --target, --foil.
  core::PatchResult patch_pair(const core::Model& model, const core::PatchOptions& po) const;
  void print_effects(const core::PatchResult& r) const;
  void write_outputs(const core::PatchResult& r) const;

  struct Options {
    std::string model, clean, corrupt, target, foil, over = "heads", json_out, figure, dataset;
    FigureSizeOptions size;
    std::string shard;
    std::vector<std::string> merge;
    int bootstrap = 1000;
    int threads = 0;
  } o;  // bound by add_options
};

void PatchCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model, "; not with --merge");
  cmd.add_option("--clean", o.clean, "Clean prompt");
  cmd.add_option("--corrupt", o.corrupt, "Corrupted prompt (same number of tokens)");
  cmd.add_option("--target", o.target, "Answer token of the clean prompt (one token, e.g. ' the')");
  cmd.add_option("--foil", o.foil, "Competing token (the corrupt prompt's answer)");
  cmd.add_option("--dataset", o.dataset,
                 "JSONL of {\"clean\", \"corrupt\", \"target\", \"foil\"} pairs: mean effects "
                 "with bootstrap 95% intervals");
  cmd.add_option("--bootstrap", o.bootstrap, "Bootstrap resamples (--dataset)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd.add_option("--over", o.over,
                 "heads (each head's output, layer x head), positions (the residual stream, "
                 "layer x position) or patterns (each head's attention pattern, the corrupt "
                 "run's values kept, layer x head)")
      ->capture_default_str()
      ->check(CLI::IsMember({"heads", "positions", "patterns"}));
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
  add_json_option(cmd, o.json_out, "Write the effects and both logit differences");
  cmd.add_option("--figure", o.figure, "The effect grid (.png/.svg/.pdf)");
  add_figure_size_options(cmd, o.size);
  cmd.add_option("--shard", o.shard,
                 "--dataset: patch every n-th pair from the i-th (i/n, 0-based) and write their "
                 "grids to --json, for --merge");
  cmd.add_option("--merge", o.merge,
                 "Join the --json files of --shard runs and report them as one run")
      ->expected(1, -1);
}

int PatchCommand::run() {
  check_outputs();
  core::PatchResult r;
  if (!o.merge.empty()) {
    r = merge();  // a merge reads numbers only
  } else {
    o.model = model_or_default(o.model);
    check_model_path(o.model, o.model);
    const std::shared_ptr<const core::Model> model = core::cached_model(o.model);
    usage(!model->info().vision && model->info().vocab > 0,
          "--model " + o.model + " has no token logits: patching needs a language model");
    usage(o.shard.empty() || (!o.dataset.empty() && !o.json_out.empty()),
          "--shard takes the pairs of --dataset and writes them to --json, for --merge");
    core::PatchOptions po;
    po.over = o.over;
    po.threads = o.threads;
    r = o.dataset.empty() ? patch_pair(*model, po) : patch_dataset(*model, po);
  }
  print_effects(r);
  write_outputs(r);
  return kExitOk;
}

void PatchCommand::check_outputs() const {
  check_figure_option(o.figure);
  if (!o.json_out.empty()) core::check_output_path(o.json_out);
}

core::PatchResult PatchCommand::merge() {
  usage(o.model.empty() && o.dataset.empty() && o.clean.empty() && o.corrupt.empty() &&
            o.shard.empty(),
        "--merge joins the shard files of patch --dataset --shard: give only the files and "
        "the output options (--json, --figure, --bootstrap)");
  std::vector<core::PatchShard> shards;
  for (const std::string& f : o.merge)
    shards.push_back(core::patch_shard_from_json(read_shard_json(f), f));
  const core::PatchShard m = core::merge_patch_shards(shards);
  o.model = m.model;
  o.dataset = m.dataset;
  o.over = m.over;
  core::PatchResult r = core::summarize_patch_runs(m.runs, o.bootstrap);
  r.target_text = r.foil_text = "(per pair)";
  std::printf(
      "%s: %d pairs from %s (%zu shards); mean LD = logit(target) - logit(foil) at the last "
      "position: clean %.4f, corrupt %.4f\n",
      o.model.c_str(), r.records, o.dataset.c_str(), o.merge.size(), r.ld_clean, r.ld_corrupt);
  return r;
}

core::PatchResult PatchCommand::patch_dataset(const core::Model& model,
                                              const core::PatchOptions& po) const {
  usage(o.clean.empty() && o.corrupt.empty() && o.target.empty() && o.foil.empty(),
        "--dataset holds the pairs: do not give --clean, --corrupt, --target or --foil");
  std::vector<core::PatchRecord> records;
  core::Shard shard;
  if (!o.shard.empty()) {
    try {
      shard = core::parse_shard(o.shard);
    } catch (const Error& e) {
      throw UsageError(std::string("--shard: ") + e.what());
    }
  }
  const std::vector<core::PatchRecordText> texts = core::read_patch_dataset(o.dataset);
  for (int i : core::shard_items(int(texts.size()), shard)) {
    const core::PatchRecordText& t = texts[size_t(i)];
    core::PatchRecord rec;
    rec.index = i;
    rec.name = t.source;
    rec.clean = core::encode_for_model(model, t.clean, t.source + " clean").ids;
    rec.corrupt = core::encode_for_model(model, t.corrupt, t.source + " corrupt").ids;
    require(rec.clean.size() == rec.corrupt.size(), ErrorCode::InvalidArgument,
            t.source + ": clean is " + std::to_string(rec.clean.size()) +
                " tokens but corrupt is " + std::to_string(rec.corrupt.size()));
    rec.target = core::single_token(model, t.target, t.source + " target");
    rec.foil = core::single_token(model, t.foil, t.source + " foil");
    records.push_back(std::move(rec));
  }
  usage(!records.empty(),
        "--shard " + o.shard + " owns none of the " + std::to_string(texts.size()) + " pairs");
  const std::vector<core::PatchRun> runs = core::patch_runs(model, records, po);
  if (!o.shard.empty()) {
    write_json_file(o.json_out, core::patch_shard_json({o.model, o.dataset, o.over, runs}));
    std::fprintf(stderr, "wrote %s (shard %s: %zu pairs; join with patch --merge)\n",
                 o.json_out.c_str(), o.shard.c_str(), runs.size());
  }
  core::PatchResult r = core::summarize_patch_runs(runs, o.bootstrap);
  r.target_text = r.foil_text = "(per pair)";
  std::printf(
      "%s: %d pairs from %s; mean LD = logit(target) - logit(foil) at the last "
      "position: clean %.4f, corrupt %.4f\n",
      o.model.c_str(), r.records, o.dataset.c_str(), r.ld_clean, r.ld_corrupt);
  return r;
}

core::PatchResult PatchCommand::patch_pair(const core::Model& model,
                                           const core::PatchOptions& po) const {
  usage(!o.clean.empty() && !o.corrupt.empty() && !o.target.empty() && !o.foil.empty(),
        "give --clean, --corrupt, --target and --foil (or --dataset)");
  const core::TextInput clean = core::encode_for_model(model, o.clean, "--clean");
  const core::TextInput corrupt = core::encode_for_model(model, o.corrupt, "--corrupt");
  usage(clean.ids.size() == corrupt.ids.size(),
        "--clean is " + std::to_string(clean.ids.size()) + " tokens but --corrupt is " +
            std::to_string(corrupt.ids.size()) + ": patching needs the same length");
  int32_t target = 0, foil = 0;
  try {
    target = core::single_token(model, o.target, "--target");
    foil = core::single_token(model, o.foil, "--foil");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  usage(target != foil, "--target and --foil are the same token");
  core::PatchResult r = core::activation_patching(model, clean.ids, corrupt.ids, target, foil, po);
  r.target_text = o.target;
  r.foil_text = o.foil;
  std::printf(
      "%s: %zu tokens; LD = logit('%s') - logit('%s') at the last position: "
      "clean %.4f, corrupt %.4f\n",
      o.model.c_str(), clean.ids.size(), o.target.c_str(), o.foil.c_str(), r.ld_clean,
      r.ld_corrupt);
  return r;
}

// The effect grid as a table: one row per layer, one column per head or position.
void PatchCommand::print_effects(const core::PatchResult& r) const {
  std::vector<std::string> header = {"layer"};
  for (int j = 0; j < r.cols; ++j)
    header.push_back(o.over != "positions" ? "H" + std::to_string(j)
                     : j < int(r.corrupt_labels.size())
                         ? std::to_string(j) + ":" + r.corrupt_labels[size_t(j)]
                         : std::to_string(j));
  Table t(header);
  for (int l = 0; l < r.rows; ++l) {
    std::vector<std::string> row = {"L" + std::to_string(l)};
    for (int j = 0; j < r.cols; ++j) row.push_back(fixed(r.effect[size_t(l) * r.cols + j], 3));
    t.add(row);
  }
  t.print();
  std::printf(
      "effect = (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt): 1 restores the "
      "clean answer, 0 changes nothing\n");
}

void PatchCommand::write_outputs(const core::PatchResult& r) const {
  if (!o.json_out.empty() && o.shard.empty()) {  // a shard's --json holds its pairs
    write_json_file(o.json_out, core::patch_json(r));
  }
  if (!o.figure.empty()) {
    const core::FigureData fd = core::patch_figure(r, o.model);
    fig::export_figure(fd, o.figure, figure_size(o.size, fd, {2100, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
  }
}

}  // namespace

std::unique_ptr<Command> make_patch_command() {
  return std::make_unique<PatchCommand>();
}

}  // namespace attn::cli
