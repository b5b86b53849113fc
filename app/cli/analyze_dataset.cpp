#include "app/cli/analyze_dataset.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/json_file.h"
#include "app/cli/progress.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/sweep.h"
#include "app/core/datasets/dataset_analysis.h"
#include "app/core/datasets/image_dataset.h"
#include "app/core/datasets/text_dataset.h"
#include "app/core/heads/head_atlas.h"
#include "app/core/heads/head_metrics.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/error.h"

namespace attn::cli {
namespace {

std::string with_interval(const core::Interval& v, int digits) {
  if (!std::isfinite(v.mean)) return "-";
  std::string s = fixed(v.mean, digits);
  if (std::isfinite(v.lo) && v.lo != v.hi)
    s += " [" + fixed(v.lo, digits) + ", " + fixed(v.hi, digits) + "]";
  return s;
}

std::vector<core::DatasetItem> read_items(const core::Model& model, const std::string& path,
                                          int64_t limit) {
  std::vector<core::DatasetItem> items;
  if (core::is_image_dataset(path)) {
    usage(model.info().vision, "--dataset " + path +
                                   " holds images: image datasets need a vision model "
                                   "(default-vision)");
    core::ImageDataset d = core::read_image_dataset(path, model.preprocessor().channels, limit);
    for (core::ImageRecord& r : d.records) {
      core::DatasetItem it;
      it.name = r.source;
      it.input.kind = "image";
      it.input.image = r.source;
      it.image = std::move(r.image);
      it.label = r.label;
      items.push_back(std::move(it));
    }
    return items;
  }
  usage(!model.info().vision, "--dataset " + path +
                                  " holds text: a vision model takes an image dataset (a folder "
                                  "of images, or Fashion-MNIST's IDX files)");
  for (core::TextRecord& r : core::read_text_dataset(path)) {
    if (limit > 0 && int64_t(items.size()) >= limit) break;
    core::DatasetItem it;
    it.name = r.source;
    it.input.kind = "text";
    it.input.text = std::move(r.text);
    items.push_back(std::move(it));
  }
  return items;
}

}  // namespace

namespace {

void check_figure_options(const AnalyzeDatasetArgs& a) {
  check_figure_option(a.figure);
  if (!a.figure_metric.empty()) {
    try {
      core::head_metric_index(a.figure_metric);
    } catch (const Error& e) {
      throw UsageError(std::string("--figure-metric: ") + e.what());
    }
  }
}

// What the plain loss averages: the records as given (no BOS added), each record weighing the
// same, as `heads` does over its windows (which start with BOS).
std::string loss_scope() {
  return std::string(core::kLossScope) +
         " (each record as given: no BOS is added, so `heads --dataset`, whose windows start with "
         "BOS, gives the same number on records that begin with the BOS token's text)";
}

// The table, the JSON and the figure of a summary.
void report(const core::DatasetAnalysis& d, const AnalyzeDatasetArgs& a, bool write_summary) {
  const bool vision = d.panels.empty() || !std::isfinite(d.panels[0].loss.mean);
  std::printf("model: %s \u2014 %lld records of %s (%lld cut to the context), %.1f s\n",
              d.model.c_str(), (long long)d.records, d.dataset.c_str(), (long long)d.truncated,
              d.seconds);
  if (!d.ablation_heads.empty()) {
    std::printf("ablated: %s (%s) in every pass; the ablated model against the plain one:",
                d.ablation_heads.c_str(),
                d.ablation_mode == "mean" ? "corpus mean" : d.ablation_mode.c_str());
    if (vision)
      std::printf(" class agreement %s\n", with_interval(d.ablation_class_agreement, 4).c_str());
    else
      std::printf(" loss %s -> %s, rise %s, next-token KL %s\n",
                  with_interval(d.plain_loss, 4).c_str(), with_interval(d.ablation_loss, 4).c_str(),
                  with_interval(d.ablation_loss_rise, 4).c_str(),
                  with_interval(d.ablation_kl, 4).c_str());
  }
  std::vector<std::string> header = {"variant", "kept", "rel.err"};
  if (vision)
    header.insert(header.end(), {"accuracy [95% CI]", "drop [95% CI]", "class agree"});
  else
    header.insert(header.end(), {"loss [95% CI]", "rise [95% CI]", "next-token KL", "top-1"});
  Table t(header);
  for (const core::PanelSummary& p : d.panels) {
    std::vector<std::string> row = {p.spec, fixed(p.density.mean, 4), sci(p.rel_error.mean)};
    if (vision) {
      row.insert(row.end(), {with_interval(p.accuracy, 4), with_interval(p.accuracy_drop, 4),
                             with_interval(p.class_agreement, 4)});
    } else {
      row.insert(row.end(),
                 {with_interval(p.loss, 4), with_interval(p.loss_rise, 4),
                  std::isfinite(p.next_token_kl.mean) ? sci(p.next_token_kl.mean) : "-",
                  std::isfinite(p.top1_agreement.mean) ? fixed(p.top1_agreement.mean, 4) : "-"});
    }
    t.add(row);
  }
  t.print();
  std::printf("means over the records with bootstrap 95%% intervals (%d resamples)%s\n",
              a.bootstrap,
              vision ? "; accuracy against the dataset's labels"
                     : "; loss: next-token loss in nats, rise paired record by record");
  if (!vision) std::printf("loss: %s\n", loss_scope().c_str());
  if (write_summary && !a.json_out.empty()) {
    nlohmann::json j = core::dataset_analysis_json(d);
    if (!vision) j["loss_scope"] = loss_scope();
    write_json_file(a.json_out, j);
  }
  if (!a.figure.empty()) {
    int panel = 0;
    if (!a.figure_variant.empty() && a.figure_variant != "dense") {
      panel = -1;
      for (size_t i = 1; i < d.panels.size(); ++i)
        if (d.panels[i].spec == a.figure_variant) panel = int(i);
      usage(panel >= 0, "--figure-variant " + a.figure_variant + " is not one of the variants");
    }
    const bool grid = !a.figure_metric.empty() || d.panels.size() == 1;
    const core::FigureData fd =
        grid ? core::dataset_analysis_grid(d, a.figure_metric.empty() ? "entropy" : a.figure_metric,
                                           panel)
             : core::dataset_analysis_tradeoff(d);
    fig::export_figure(
        fd, a.figure,
        figure_size(a.figure_size, fd,
                    grid ? core::FigureSize{2100, 0, 300} : core::FigureSize{2100, 1350, 300}));
    if (!a.quiet) std::fprintf(stderr, "wrote %s\n", a.figure.c_str());
  }
}

}  // namespace

int analyze_dataset(const core::Session& s, const std::string& session_path,
                    const AnalyzeDatasetArgs& a) {
  usage(a.limit >= 0, "--limit must be >= 0");
  usage(a.bootstrap >= 0, "--bootstrap must be >= 0");
  usage(a.merge.empty(), "--merge joins shard files: it does not go with --dataset");
  check_figure_options(a);
  core::Shard shard;
  if (!a.shard.empty()) {
    try {
      shard = core::parse_shard(a.shard);
    } catch (const Error& e) {
      throw UsageError(std::string("--shard: ") + e.what());
    }
    usage(!a.json_out.empty(),
          "--shard writes its records' samples to --json, for analyze --merge: give --json");
  }
  const auto model = core::cached_model(core::is_default_model_name(s.model.id)
                                            ? s.model.id
                                            : core::resolve_session_path(session_path, s.model.id));
  std::vector<core::DatasetItem> all = read_items(*model, a.dataset, a.limit);
  for (size_t i = 0; i < all.size(); ++i) all[i].index = int64_t(i);
  std::vector<core::DatasetItem> mine;
  for (int i : core::shard_items(int(all.size()), shard)) mine.push_back(all[size_t(i)]);
  usage(!mine.empty(),
        "--shard " + a.shard + " owns none of the " + std::to_string(all.size()) + " records");
  if (!a.quiet)
    std::fprintf(stderr, "analyze: dense + %zu variants over %zu records of %s on %s%s\n",
                 s.variants.size(), mine.size(), a.dataset.c_str(), s.model.id.c_str(),
                 a.shard.empty() ? "" : (" (shard " + a.shard + ")").c_str());
  Progress progress(int(mine.size()), a.quiet, "analyze");
  core::DatasetAnalysisOptions o;
  o.analysis.threads = a.threads;
  o.analysis.end_to_end = a.end_to_end;
  o.bootstrap = a.bootstrap;
  o.mean_over = &all;
  o.progress = [&](int64_t done, int64_t) {
    progress.step(int(done), mine[size_t(done - 1)].name);
  };
  core::DatasetSamples samples = core::collect_dataset(s, session_path, mine, o);
  samples.dataset = a.dataset;
  if (!a.shard.empty()) {
    write_json_file(a.json_out, core::dataset_samples_json(samples));
    if (!a.quiet)
      std::fprintf(stderr, "wrote %s (shard %s: %zu records; join with analyze --merge)\n",
                   a.json_out.c_str(), a.shard.c_str(), mine.size());
  }
  report(core::summarize_dataset(samples, a.bootstrap), a, a.shard.empty());
  return 0;
}

int merge_dataset_shards(const AnalyzeDatasetArgs& a) {
  usage(a.bootstrap >= 0, "--bootstrap must be >= 0");
  check_figure_options(a);
  std::vector<core::DatasetSamples> shards;
  for (const std::string& f : a.merge) {
    shards.push_back(core::dataset_samples_from_json(read_shard_json(f), f));
  }
  const core::DatasetSamples merged = core::merge_dataset_samples(shards);
  report(core::summarize_dataset(merged, a.bootstrap), a, true);
  return 0;
}

}  // namespace attn::cli
