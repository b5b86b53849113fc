// `attnscope analyze --dataset`: the single-input analysis (analysis.h) of every record of a
// dataset, aggregated. Each record runs the whole session (dense capture, each variant on every
// layer, per-head metrics, end-to-end substitution, the session's ablation) exactly as one input
// would; what comes out is, per panel, the mean over the records of every head-grid metric per
// layer x head and of every trade-off number, each with a bootstrap 95% interval over the
// records, plus the next-token loss (causal LMs) or class accuracy (labelled images) under each
// variant and under the ablation, with the rise/drop paired record by record.
//
// Mean ablation over a dataset uses the corpus mean: each ablated head's output averaged over
// every position of every record (a first pass), as TransformerLens users compute it.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "app/core/analysis/analysis.h"
#include "app/core/export/figure_data.h"
#include "models/arch/image.h"

namespace attn::core {

// One record: an input the session's model takes, with a name for messages.
struct DatasetItem {
  std::string name;    // "pairs.jsonl:3", "t10k-images-idx3-ubyte.gz:17"
  int64_t index = -1;  // its place in the whole dataset (shards); -1 = its place in the list
  SessionInput input;
  models::Image8
      image;       // input.kind "image" with an in-memory image (IDX records); empty = read file
  int label = -1;  // class index of a labelled image; -1 = none
};

// The mean of x over the records with its bootstrap 95% interval; NaN when no record has one.
struct Interval {
  double mean = std::numeric_limits<double>::quiet_NaN();
  double lo = std::numeric_limits<double>::quiet_NaN();
  double hi = std::numeric_limits<double>::quiet_NaN();
  int64_t n = 0;  // records with a value
};
// The Interval of x (NaN entries left out); bootstrap 0 gives lo = hi = mean.
Interval interval_of(const std::vector<double>& x, int bootstrap, uint64_t seed);

struct PanelSummary {
  std::string spec;
  // [metric of head_metrics()] f32 [L, H]: per-head means over the records and their intervals
  // (NaN where no record had the value: per-head comparisons skipped, or dense against itself).
  std::vector<std::vector<float>> mean, lo, hi;
  // Per record over every layer (views.h TradeoffPoint), then over the records.
  Interval density, rel_error, mass_recall, row_kl, flops;
  // End to end against the (ablated) dense model: next-token KL and top-1 agreement (LMs);
  // class agreement (image classifiers).
  Interval next_token_kl, top1_agreement, class_agreement;
  // Causal LMs: next-token loss (nats) of each record under this panel, and its rise over
  // dense's paired record by record. Labelled images: accuracy and its drop from dense's.
  Interval loss, loss_rise, accuracy, accuracy_drop;
};

struct DatasetAnalysis {
  std::string model;      // the session's model id
  std::string dataset;    // as given
  int64_t records = 0;    // records analysed
  int64_t truncated = 0;  // records cut to the model's context
  int n_layers = 0, n_heads = 0;
  std::vector<std::string> metrics;  // head_metrics() names
  std::vector<PanelSummary> panels;  // [0] dense, then the session's variants
  // The session's ablation (empty heads: none): the ablated model against the plain one.
  std::string ablation_heads, ablation_mode;
  Interval ablation_kl, ablation_top1, ablation_loss, ablation_loss_rise, ablation_class_agreement;
  Interval plain_loss;  // the plain model's loss (with an ablation)
  double seconds = 0;
};

struct DatasetAnalysisOptions {
  Options analysis;      // per record (threads, cancel, per-head bound, end_to_end)
  int bootstrap = 1000;  // resamples for every interval (0: none, lo = hi = mean)
  uint64_t seed = 1234;
  // After each record: records done, records in all.
  std::function<void(int64_t done, int64_t total)> progress;
  // Corpus-mean ablation averages over these records (a shard's: the whole dataset's, so every
  // shard ablates with the same mean); null = the analysed items.
  const std::vector<DatasetItem>* mean_over = nullptr;
};

// What every record gave, before any averaging: the unit of sharding. Values are per record in
// `index` order; NaN where a record has none.
struct PanelSamples {
  std::string spec;
  std::vector<std::vector<std::vector<double>>> heads;  // [metric][layer * H + head][record]
  std::vector<double> density, rel_error, mass_recall, row_kl, flops;
  std::vector<double> kl, top1, class_agree, loss, correct;
};
struct DatasetSamples {
  std::string model, dataset;
  int n_layers = 0, n_heads = 0;
  std::vector<std::string> metrics;  // head_metrics() names
  std::vector<int64_t> index;        // [record] its place in the whole dataset, ascending
  std::vector<std::string> names;    // [record]
  std::vector<int> truncated;        // [record] 1 = cut to the model's context
  std::vector<PanelSamples> panels;  // [0] dense, then the session's variants
  std::string ablation_heads, ablation_mode;
  std::vector<double> ablation_kl, ablation_top1, ablation_class, plain_loss;  // [record]
  double seconds = 0;
};

// Runs `s` (its model, variants, substitution and ablation; its input is ignored) on every item.
// Throws Error(InvalidArgument) for an empty dataset, a record the model cannot take (named), a
// model-free session (tensors, synthetic), or an ablation mode other than zero or mean.
DatasetSamples collect_dataset(const Session& s, const std::string& session_path,
                               const std::vector<DatasetItem>& items,
                               const DatasetAnalysisOptions& o = {});
// Means and intervals of the samples (the intervals resample the records in `index` order, so
// merged shards give the single run's numbers exactly).
DatasetAnalysis summarize_dataset(const DatasetSamples& d, int bootstrap = 1000,
                                  uint64_t seed = 1234);
// collect_dataset() then summarize_dataset().
DatasetAnalysis analyze_dataset(const Session& s, const std::string& session_path,
                                const std::vector<DatasetItem>& items,
                                const DatasetAnalysisOptions& o = {});

// Shards: samples as JSON (a `--shard` run's file; NaN as null) and back, and merged. Parsing
// throws Error(Format) naming `source`; merging throws Error(Format) when the shards differ in
// model, dataset, variants, ablation or shape, or a record appears twice.
nlohmann::json dataset_samples_json(const DatasetSamples& d);
bool is_dataset_samples_json(const nlohmann::json& j);
DatasetSamples dataset_samples_from_json(const nlohmann::json& j, const std::string& source);
DatasetSamples merge_dataset_samples(const std::vector<DatasetSamples>& shards);

// JSON (version 1): model, dataset, records, and per panel each interval and each head metric's
// [L][H] mean, ci_low, ci_high.
nlohmann::json dataset_analysis_json(const DatasetAnalysis& d);
// Figure data: a head metric of one panel as a layer x head grid with its intervals (view heads),
// or every panel's loss / accuracy against density with error bars (view tradeoff).
FigureData dataset_analysis_grid(const DatasetAnalysis& d, const std::string& metric, int panel);
FigureData dataset_analysis_tradeoff(const DatasetAnalysis& d);

}  // namespace attn::core
