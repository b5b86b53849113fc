// A vision model over a whole image dataset (image_dataset.h), with a variant substituted into
// every attention layer and head: class accuracy against the labels, agreement with dense, and
// what the variant kept and counted. The dataset-level trade-off of `attnscope sweep --dataset`.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "app/core/analysis/views.h"
#include "app/core/datasets/image_dataset.h"
#include "models/arch/model.h"

namespace attn::core {

struct DatasetEval {
  std::string spec;      // the variant ("dense" for the baseline)
  int64_t records = 0;   // images evaluated
  int64_t labelled = 0;  // of which with a label
  double accuracy = 0;   // labelled images whose predicted class is the label (share)
  // Bootstrap 95% intervals over the labelled images (1,000 resamples, seeded): of the accuracy,
  // and of the drop from dense paired image by image (NaN without a dense baseline).
  double accuracy_lo = 0, accuracy_hi = 0, drop_lo = 0, drop_hi = 0;
  double agreement = 0;            // images whose class equals dense's (share; 1 for dense)
  double density = 0;              // kept / visible attention entries, mean over images and layers
  double attention_flops = 0;      // counted attention flops per image (kernels + selection)
  double seconds = 0;              // wall time of the whole pass
  std::vector<int32_t> predicted;  // [records] predicted class
};

struct DatasetEvalOptions {
  std::string backend = "cpu";
  int threads = 0;  // images run in parallel, one worker per thread (0 = all)
  const std::atomic<bool>* cancel = nullptr;
};

// Runs `spec` (a variant spec; "dense" runs the dense kernel the same way, so every row's
// counted flops mean the same) over every record of `d`. `dense` (the baseline's predictions, or
// null) gives the agreement. Throws Error(InvalidArgument) for a text model, a malformed spec,
// or an image the model cannot take.
DatasetEval evaluate_image_dataset(const models::Model& model, const ImageDataset& d,
                                   const std::string& spec, const std::vector<int32_t>* dense,
                                   const DatasetEvalOptions& o = {});

// A row of a dataset sweep table: the evaluation and its place in the full sweep (0: dense, which
// every shard runs: the agreement and the paired drop need its predictions).
struct DatasetRow {
  int index = 0;
  DatasetEval eval;  // `predicted` is not part of the table
};

// CSV: a header line, then one line per row in the order given; the drop is against the row of
// index 0, which must be present (Error(InvalidArgument) otherwise). An interval that does not
// exist (the baseline's drop) is an empty field.
std::string dataset_csv(const std::vector<DatasetRow>& rows);
// Parses a table written by dataset_csv(); throws Error(Format) naming the file and line.
std::vector<DatasetRow> parse_dataset_csv(const std::string& text, const std::string& source);
// Whether a table's first line is dataset_csv()'s header.
bool is_dataset_csv(const std::string& text);
// Merges shard tables: sorted by index, the dense row once. Throws Error(Format) when shards'
// dense rows differ (another dataset or model), an index appears twice, or one is missing.
std::vector<DatasetRow> merge_dataset_rows(const std::vector<std::vector<DatasetRow>>& shards);

// A row as a trade-off point (`sweep --dataset --figure`): its density and counted attention
// flops per image against its class accuracy, with the accuracy's interval as an error bar.
TradeoffPoint dataset_point(const DatasetEval& e);

}  // namespace attn::core
