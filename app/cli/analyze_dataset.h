// `attnscope analyze --dataset`: the analysis core's dataset mode
// (app/core/datasets/dataset_analysis.h) as a table, JSON and a figure.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/cli/options.h"
#include "app/core/session/session.h"

namespace attn::cli {

struct AnalyzeDatasetArgs {
  std::string dataset;  // JSONL, a folder of .txt, a folder of images, an IDX folder
  std::string json_out, figure;
  std::string figure_metric;   // a head metric: the per-head grid; "" = the trade-off figure
  std::string figure_variant;  // the grid's panel (a spec of the session; "" = dense)
  int64_t limit = 0;           // first records only (0 = all)
  std::string shard;           // "i/n": every n-th record from the i-th; --json gets the samples
  std::vector<std::string> merge;  // shard files to merge instead of running
  int bootstrap = 1000;
  int threads = 0;
  bool end_to_end = true, quiet = false;
  FigureSizeOptions figure_size;  // --width, --height, --dpi of --figure
};

// Runs the session (model, variants, substitution, ablation; its input is ignored) over the
// dataset. Throws UsageError / attn::Error naming what is wrong.
int analyze_dataset(const core::Session& s, const std::string& session_path,
                    const AnalyzeDatasetArgs& a);
// --merge: the shards' samples joined, then reported as one run over the whole dataset would be.
int merge_dataset_shards(const AnalyzeDatasetArgs& a);

}  // namespace attn::cli
