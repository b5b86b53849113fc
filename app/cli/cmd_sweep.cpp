// `attnscope sweep`: runs parameter sweeps of variants on one input for trade-off curves, with a
// progress bar on stderr; --shard i/n runs every n-th point (cluster array jobs) and --merge
// joins the shard tables into the table one run would have written. Row 0 of every table is the
// dense baseline measured in the same run (shard 0 writes it), so a plot of the table is complete.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/cli/progress.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/analysis/evaluate.h"
#include "app/core/analysis/sweep.h"
#include "app/core/datasets/dataset_eval.h"
#include "app/core/datasets/image_dataset.h"
#include "app/core/datasets/text_dataset.h"
#include "app/core/datasets/text_dataset_eval.h"
#include "app/core/export/data_export.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::cli {
using namespace core;  // the verb is a thin client of the core
namespace {

struct SweepOptions {
  std::string model, text, text_file, image, out, figure, shard, backend = "cpu";
  std::string dataset;  // image dataset: accuracy over every record instead of one input
  int64_t limit = 0;    // --dataset: first records only
  std::string session;  // model and input from a session file instead
  std::vector<std::string> variants, merge;
  std::vector<std::string> precisions;  // storage precisions of Q, K, V: an axis of the table
  std::vector<int> layers, heads;
  int threads = 0;
  FigureSizeOptions size;  // over the preset 2100 x 1050 px at 300 dpi
  bool no_end_to_end = false, quiet = false;
  std::string json;  // --json [FILE]: the rows as JSON ("-": stdout)
};

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  require(bool(f), ErrorCode::Io, path + ": cannot open " + what);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_figure(const SweepOptions& o, const std::vector<TradeoffPoint>& pts,
                  const std::string& subtitle, const Session* s) {
  if (o.figure.empty()) return;
  const FigureSize size = o.size.apply({2100, 1050, 300});
  const FigureData f = tradeoff_figure(pts, "Cost vs accuracy of attention variants", subtitle);
  fig::export_figure(f, o.figure, size);
  if (s) fig::write_sidecar(*s, "", o.figure, View::Tradeoff, size);
  if (!o.quiet) std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
}

void print_json(const SweepOptions& o, const std::vector<SweepRow>& rows) {
  if (o.json.empty()) return;
  nlohmann::json j = nlohmann::json::array();
  for (const SweepRow& r : rows) {
    nlohmann::json p = to_json(r.point);
    p["index"] = r.index;
    j.push_back(p);
  }
  write_json_output(o.json, j.dump(2));
}

// "fashion-mnist" for /usr/share/datasets/fashion-mnist/, "pairs.jsonl" for a/b/pairs.jsonl: what
// a figure's subtitle names.
std::string dataset_name(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();
  return p.filename().string();
}

nlohmann::json num_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// The dataset table's figure: accuracy against density, the intervals as error bars.
void write_dataset_figure(const SweepOptions& o, const std::vector<DatasetRow>& rows,
                          const std::string& subtitle) {
  if (o.figure.empty()) return;
  std::vector<TradeoffPoint> pts;
  for (const DatasetRow& r : rows) pts.push_back(core::dataset_point(r.eval));
  FigureData f = tradeoff_figure(pts, "Class accuracy against attention density", subtitle);
  f.settings.tradeoff_x = "density";
  f.settings.tradeoff_y = "accuracy";
  fig::export_figure(f, o.figure, o.size.apply({2100, 1050, 300}));
  if (!o.quiet) std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
}

void print_dataset_json(const SweepOptions& o, const std::vector<DatasetRow>& rows) {
  if (o.json.empty()) return;
  nlohmann::json j = nlohmann::json::array();
  for (const DatasetRow& row : rows) {
    const DatasetEval& r = row.eval;
    j.push_back({{"index", row.index},
                 {"spec", r.spec},
                 {"records", r.records},
                 {"labelled", r.labelled},
                 {"accuracy", r.accuracy},
                 {"accuracy_interval", {num_or_null(r.accuracy_lo), num_or_null(r.accuracy_hi)}},
                 {"drop_interval", {num_or_null(r.drop_lo), num_or_null(r.drop_hi)}},
                 {"agreement_with_dense", r.agreement},
                 {"density", r.density},
                 {"attention_flops_per_image", r.attention_flops},
                 {"seconds", r.seconds}});
  }
  write_json_output(o.json, j.dump(2));
}

// The text dataset table's figure: loss (and KL) against density, the intervals as error bars.
void write_text_dataset_figure(const SweepOptions& o, const std::vector<TextDatasetRow>& rows,
                               const std::string& subtitle) {
  if (o.figure.empty()) return;
  std::vector<TradeoffPoint> pts;
  for (const TextDatasetRow& r : rows) pts.push_back(core::text_dataset_point(r.eval));
  FigureData f = tradeoff_figure(pts, "Next-token loss against attention density", subtitle);
  f.settings.tradeoff_x = "density";
  f.settings.tradeoff_y = "loss";
  fig::export_figure(f, o.figure, o.size.apply({2100, 1050, 300}));
  if (!o.quiet) std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
}

void print_text_dataset_json(const SweepOptions& o, const std::vector<TextDatasetRow>& rows) {
  if (o.json.empty()) return;
  const auto base =
      std::find_if(rows.begin(), rows.end(), [](const TextDatasetRow& r) { return r.index == 0; });
  nlohmann::json j = nlohmann::json::array();
  for (const TextDatasetRow& row : rows) {
    const TextDatasetEval& r = row.eval;
    j.push_back({{"index", row.index},
                 {"spec", r.spec},
                 {"records", r.records},
                 {"tokens", r.tokens},
                 {"loss", r.loss},
                 {"loss_interval", {num_or_null(r.loss_lo), num_or_null(r.loss_hi)}},
                 {"loss_rise",
                  base != rows.end() ? num_or_null(r.loss - base->eval.loss) : nlohmann::json()},
                 {"rise_interval", {num_or_null(r.rise_lo), num_or_null(r.rise_hi)}},
                 {"next_token_kl", r.next_token_kl},
                 {"top1_agreement", r.top1_agreement},
                 {"density", r.density},
                 {"attention_flops_per_token", r.attention_flops},
                 {"seconds", r.seconds}});
  }
  write_json_output(o.json, j.dump(2));
}

int merge(const SweepOptions& o) {
  if (!o.merge.empty() && core::is_text_dataset_csv(read_file(o.merge.front(), "sweep table"))) {
    std::vector<std::vector<TextDatasetRow>> shards;
    for (const std::string& f : o.merge)
      shards.push_back(core::parse_text_dataset_csv(read_file(f, "sweep table"), f));
    const std::vector<TextDatasetRow> rows = core::merge_text_dataset_rows(shards);
    write_file_atomic(o.out, text_dataset_csv(rows));
    if (!o.quiet)
      std::fprintf(stderr, "merged %zu rows from %zu text dataset tables into %s\n", rows.size(),
                   o.merge.size(), o.out.c_str());
    write_text_dataset_figure(o, rows, "merged from " + std::to_string(o.merge.size()) + " shards");
    print_text_dataset_json(o, rows);
    return 0;
  }
  if (!o.merge.empty() && core::is_dataset_csv(read_file(o.merge.front(), "sweep table"))) {
    std::vector<std::vector<DatasetRow>> shards;
    for (const std::string& f : o.merge)
      shards.push_back(core::parse_dataset_csv(read_file(f, "sweep table"), f));
    const std::vector<DatasetRow> rows = core::merge_dataset_rows(shards);
    write_file_atomic(o.out, dataset_csv(rows));
    if (!o.quiet)
      std::fprintf(stderr, "merged %zu rows from %zu dataset tables into %s\n", rows.size(),
                   o.merge.size(), o.out.c_str());
    write_dataset_figure(o, rows, "merged from " + std::to_string(o.merge.size()) + " shards");
    print_dataset_json(o, rows);
    return 0;
  }
  std::vector<std::vector<SweepRow>> shards;
  for (const std::string& f : o.merge)
    shards.push_back(parse_tradeoff_csv(read_file(f, "sweep table"), f));
  const std::vector<SweepRow> rows = merge_sweep_rows(shards);
  write_file_atomic(o.out, tradeoff_csv(rows));
  print_json(o, rows);
  if (!o.quiet)
    std::fprintf(stderr, "merged %zu rows from %zu tables into %s\n", rows.size(), o.merge.size(),
                 o.out.c_str());
  std::vector<TradeoffPoint> pts;
  for (const auto& r : rows) pts.push_back(r.point);
  write_figure(o, pts, "merged from " + std::to_string(o.merge.size()) + " tables", nullptr);
  return 0;
}

// The command line's own mistakes (range grammar, specs, backend, shard) are usage errors.
template <class F>
auto as_usage(F&& f) {
  try {
    return f();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what(), e.code());
  }
}

// Row 0 is the dense baseline (measured in the same run); the variants follow.
std::vector<std::string> table_specs(const SweepOptions& o) {
  return as_usage([&] {
    std::vector<std::string> specs = sweep_table_specs(o.variants);
    check_variant_specs(specs, "--variant");
    check_backend(o.backend);
    return specs;
  });
}

// A text dataset (JSONL or a folder of .txt) through a causal language model: next-token loss
// per setting with intervals over the records, KL and agreement with dense.
int sweep_text_dataset(const SweepOptions& o, const std::vector<std::string>& specs) {
  Shard shard;
  if (!o.shard.empty()) shard = as_usage([&] { return parse_shard(o.shard); });
  // Every shard runs dense too: the paired rises need its per-record losses.
  std::vector<int> mine = shard_items(int(specs.size()), shard);
  if (mine.empty() || mine.front() != 0) mine.insert(mine.begin(), 0);
  const auto model = core::cached_model(o.model);
  require(!is_image_dataset(o.dataset), ErrorCode::InvalidArgument,
          o.model + " is a text model and " + o.dataset +
              " an image dataset: image datasets need a vision model (default-vision)");
  std::vector<TextRecord> recs = read_text_dataset(o.dataset);
  if (o.limit > 0 && int64_t(recs.size()) > o.limit) recs.resize(size_t(o.limit));
  const EncodedRecords enc = encode_records(*model, recs);
  std::vector<std::string> names;
  for (const TextRecord& r : recs) names.push_back(r.source);
  if (!o.quiet) {
    std::fprintf(stderr,
                 "sweep: dense + %zu variants (%zu rows in shard %d/%d) over %zu records of %s "
                 "on %s\n",
                 specs.size() - 1, mine.size(), shard.index, shard.count, recs.size(),
                 o.dataset.c_str(), o.model.c_str());
    if (enc.truncated)
      std::fprintf(stderr, "sweep: %lld records were cut to the model's context\n",
                   (long long)enc.truncated);
  }
  Progress progress(int(mine.size()), o.quiet);
  if (isatty(2)) progress.step(0, "");
  std::vector<TextDatasetRow> rows;
  DatasetEvalOptions eo;
  eo.backend = o.backend;
  eo.threads = o.threads;
  for (size_t i = 0; i < mine.size(); ++i) {
    const std::string& spec = specs[size_t(mine[i])];
    rows.push_back({mine[i], evaluate_text_dataset(*model, enc, names, spec,
                                                   i ? &rows[0].eval : nullptr, eo)});
    progress.step(int(i + 1), spec);
  }
  write_file_atomic(o.out, text_dataset_csv(rows));
  if (!o.quiet) std::fprintf(stderr, "wrote %s (%zu rows)\n", o.out.c_str(), rows.size());
  write_text_dataset_figure(o, rows,
                            o.model + " \u00b7 " + std::to_string(recs.size()) + " records of " +
                                dataset_name(o.dataset));
  print_text_dataset_json(o, rows);
  return 0;
}

int sweep_dataset(const SweepOptions& o, const std::vector<std::string>& specs) {
  const int inputs = !o.text.empty() + !o.text_file.empty() + !o.image.empty() + !o.session.empty();
  usage(inputs == 0,
        "--dataset is the input: do not give --text, --text-file, --image or --session");
  usage(o.layers.empty() && o.heads.empty(),
        "--dataset runs every setting in every layer and head: --layers and --heads are not "
        "available with it");
  check_model_path(o.model, o.model);
  if (!core::cached_model(o.model)->info().vision) return sweep_text_dataset(o, specs);
  Shard shard;
  if (!o.shard.empty()) shard = as_usage([&] { return parse_shard(o.shard); });
  // Every shard runs dense too: the agreement and the paired drops need its predictions.
  std::vector<int> mine = shard_items(int(specs.size()), shard);
  if (mine.empty() || mine.front() != 0) mine.insert(mine.begin(), 0);
  const auto model = core::cached_model(o.model);
  const ImageDataset d = read_image_dataset(o.dataset, model->preprocessor().channels, o.limit);
  if (!o.quiet)
    std::fprintf(
        stderr,
        "sweep: dense + %zu variants (%zu rows in shard %d/%d) over %zu images of %s on %s\n",
        specs.size() - 1, mine.size(), shard.index, shard.count, d.records.size(),
        o.dataset.c_str(), o.model.c_str());
  Progress progress(int(mine.size()), o.quiet);
  if (isatty(2)) progress.step(0, "");
  std::vector<DatasetRow> rows;
  DatasetEvalOptions eo;
  eo.backend = o.backend;
  eo.threads = o.threads;
  for (size_t i = 0; i < mine.size(); ++i) {
    const std::string& spec = specs[size_t(mine[i])];
    rows.push_back({mine[i], evaluate_image_dataset(*model, d, spec,
                                                    i ? &rows[0].eval.predicted : nullptr, eo)});
    progress.step(int(i + 1), spec);
  }
  write_file_atomic(o.out, dataset_csv(rows));
  if (!o.quiet) std::fprintf(stderr, "wrote %s (%zu rows)\n", o.out.c_str(), rows.size());
  write_dataset_figure(o, rows,
                       o.model + " \u00b7 " + std::to_string(d.records.size()) + " images of " +
                           dataset_name(o.dataset));
  print_dataset_json(o, rows);
  return 0;
}

int sweep(const SweepOptions& o) {
  usage(!o.out.empty(), "--out FILE.csv is required");
  // Outputs that cannot be written fail now, not after the sweep.
  check_output_path(o.out);
  if (!o.figure.empty()) fig::check_figure_path(o.figure);
  if (!o.merge.empty()) {
    usage(o.variants.empty() && o.shard.empty(),
          "--merge combines finished tables: do not give --variant or --shard with it");
    return merge(o);
  }
  usage(!o.variants.empty(), "give at least one --variant (e.g. \"window(size=16..1024:x2)\")");
  usage(o.limit >= 0, "--limit must be >= 0");
  // Precision as an axis: every variant in each precision (after the f32 dense baseline, dense
  // in each reduced one), against the f32 dense reference.
  std::vector<Precision> precisions;
  for (const std::string& name : o.precisions)
    precisions.push_back(as_usage([&] { return parse_precision(name); }));
  if (precisions.empty()) precisions.push_back(Precision::F32);
  usage(o.dataset.empty() || (precisions.size() == 1 && precisions[0] == Precision::F32),
        "--precision is not available with --dataset (sweep one input)");
  if (!o.dataset.empty()) {
    return sweep_dataset(o, table_specs(o));
  }
  const int inputs = !o.text.empty() + !o.text_file.empty() + !o.image.empty() + !o.session.empty();
  usage(inputs == 1, "give exactly one input: --text, --text-file, --image or --session");
  const std::vector<std::string> variant_specs = table_specs(o);
  // The table's rows: (spec, precision), the f32 dense baseline first.
  std::vector<std::string> specs = {variant_specs[0]};
  std::vector<Precision> precs = {Precision::F32};
  for (Precision p : precisions)
    if (p != Precision::F32) specs.push_back(variant_specs[0]), precs.push_back(p);
  for (size_t v = 1; v < variant_specs.size(); ++v)
    for (Precision p : precisions) specs.push_back(variant_specs[v]), precs.push_back(p);
  Shard shard;
  if (!o.shard.empty()) shard = as_usage([&] { return parse_shard(o.shard); });
  if (o.session.empty()) check_model_path(o.model, o.model);
  const std::vector<int> mine = shard_items(int(specs.size()), shard);

  Session s;
  s.model.id = o.model;
  if (!o.session.empty()) {  // its model and input; relative paths made usable from here
    const Session from = load_session(o.session);
    s.model = from.model;
    if (!core::is_default_model_name(s.model.id))
      s.model.id = resolve_session_path(o.session, s.model.id);
    s.input = from.input;
    if (s.input.kind == "image") s.input.image = resolve_session_path(o.session, s.input.image);
  } else if (!o.image.empty()) {
    s.input.kind = "image";
    s.input.image = o.image;
  } else {
    s.input.text = o.text.empty() ? read_file(o.text_file, "text file") : o.text;
  }
  s.backend = o.backend;
  s.substitute_layers = o.layers;
  s.substitute_heads = o.heads;
  s.view.view = "tradeoff";
  Options co;
  co.threads = o.threads;
  Options dense_only = co;
  dense_only.head_grid = false;
  // The dense reference and its comparisons, shared by every point.
  const auto a = core::add_metrics(*core::open(s, "", co), dense_only);
  const std::string input = s.input.kind + ", " + std::to_string(a->n_tokens()) + " tokens";
  if (!o.quiet)
    std::fprintf(stderr, "sweep: dense + %zu variants (%zu rows in shard %d/%d) on %s, %s\n",
                 specs.size() - 1, mine.size(), shard.index, shard.count, o.model.c_str(),
                 input.c_str());
  Progress progress(int(mine.size()), o.quiet);
  std::vector<SweepRow> rows;
  if (isatty(2)) progress.step(0, "");
  for (size_t i = 0; i < mine.size(); ++i) {
    const std::string& spec = specs[size_t(mine[i])];
    if (mine[i] == 0) {  // the baseline: the dense reference of this run, end to end when asked
      const auto base = o.no_end_to_end ? a : core::add_end_to_end(*a, co);
      rows.push_back({0, core::tradeoff_point(*base, 0)});
    } else {
      Options in_precision = co;
      in_precision.precision = precs[size_t(mine[i])];
      rows.push_back({mine[i], core::evaluate(*a, spec, !o.no_end_to_end, in_precision)});
    }
    progress.step(int(i + 1), spec);
  }
  write_file_atomic(o.out, tradeoff_csv(rows));
  if (!o.quiet) std::fprintf(stderr, "wrote %s (%zu rows)\n", o.out.c_str(), rows.size());
  print_json(o, rows);
  std::vector<TradeoffPoint> pts;
  for (const auto& r : rows) pts.push_back(r.point);
  Session record = s;
  record.variants.assign(variant_specs.begin() + 1, variant_specs.end());
  fill_hashes(record);
  write_figure(o, pts, o.model + " \u00b7 " + input, &record);
  return 0;
}

class SweepCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override {
    o.model = model_or_default(o.model, !o.image.empty() || is_image_dataset(o.dataset));
    return sweep(o);
  }

 private:
  SweepOptions o;  // bound by add_options
};

void SweepCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model, "; a --session's model when given");
  cmd.add_option("--text", o.text, "Input text");
  cmd.add_option("--text-file", o.text_file, "File holding the input text (UTF-8)");
  cmd.add_option("--image", o.image, "Input image (vision models)");
  cmd.add_option("--session", o.session, "Take the model and the input from a session file");
  cmd.add_option("--dataset", o.dataset,
                 "A dataset instead of one input. Vision models: a Fashion-MNIST / MNIST IDX "
                 "folder (FOLDER:train for the train split) or a folder of images (one subfolder "
                 "per class); the table holds class accuracy per setting. Language models: "
                 "JSONL ({\"text\": ...} per line) or a folder of .txt; the table holds "
                 "next-token loss");
  cmd.add_option("--limit", o.limit, "--dataset: only the first N records (0 = all)");
  add_variant_option(cmd, o.variants,
                     "Variant or sweep spec: \"window(size=16..1024:x2)\", "
                     "\"block_topk(block=16,k=1..8:+1)\", \"top_p(p=0.5|0.9)\"");
  cmd.add_option("--precision", o.precisions,
                 "Storage of Q, K, V as an axis: f32, bf16, f16 (comma-separated); every variant "
                 "runs in each, against the f32 dense reference (the table's precision column)")
      ->delimiter(',');
  cmd.add_option("--out", o.out, "Table to write (CSV; its first row is the dense baseline)")
      ->required();
  cmd.add_option("--figure", o.figure, "Also draw the trade-off plot (.png, .svg, .pdf)");
  cmd.add_option("--shard", o.shard,
                 "Run only shard i of n (0-based), e.g. $SLURM_ARRAY_TASK_ID/8");
  cmd.add_option("--merge", o.merge, "Merge these shard tables into --out instead of running");
  add_index_list(cmd, "--layers", o.layers, "End to end: substitute only these layers");
  add_index_list(cmd, "--heads", o.heads, "End to end: substitute only these heads");
  cmd.add_flag("--no-end-to-end", o.no_end_to_end,
               "Skip substituted forward passes (no next-token KL, top-1, perplexity)");
  cmd.add_option("--backend", o.backend, "reference | cpu")->capture_default_str();
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
  add_figure_size_options(cmd, o.size);
  add_quiet_option(cmd, o.quiet);
  add_json_option(cmd, o.json, "Also write the table's rows");
}

}  // namespace

std::unique_ptr<Command> make_sweep_command() {
  return std::make_unique<SweepCommand>();
}

}  // namespace attn::cli
