// A causal language model over a whole text dataset (text_dataset.h: JSONL or a folder of .txt),
// with a variant substituted into every attention layer and head: the next-token loss against
// dense's, paired record by record, the next-token KL and top-1 agreement with dense, and what the
// variant kept and counted. The text half of `attnscope sweep --dataset`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/core/analysis/views.h"
#include "app/core/datasets/dataset_eval.h"
#include "app/core/datasets/text_dataset.h"
#include "models/arch/model.h"

namespace attn::core {

struct TextDatasetEval {
  std::string spec;       // the variant ("dense" for the baseline)
  int64_t records = 0;    // records evaluated
  int64_t tokens = 0;     // tokens over every record (after truncation to the context)
  int64_t truncated = 0;  // records cut to the model's context
  double loss = 0;        // next-token loss (nats), mean over records
  // Bootstrap 95% intervals over the records (1,000 resamples, seeded): of the loss, and of its
  // rise over dense's, paired record by record (NaN for the baseline).
  double loss_lo = 0, loss_hi = 0, rise_lo = 0, rise_hi = 0;
  double next_token_kl = 0;    // KL(dense || variant) of the next-token distributions, mean
                               // over records of each record's mean (0 for dense)
  double top1_agreement = 1;   // positions whose argmax agrees with dense's, mean over records
  double density = 1;          // kept / visible attention entries, mean over records and layers
  double attention_flops = 0;  // counted attention flops per token (kernels + selection)
  double seconds = 0;          // wall time of the whole pass
  std::vector<double> record_loss;  // [records] each record's loss (pairs the rises)
};

// Token ids of each record, as the model's tokenizer encodes them (truncated to its context).
struct EncodedRecords {
  std::vector<std::vector<int32_t>> ids;
  int64_t truncated = 0;
};
EncodedRecords encode_records(const models::Model& model, const std::vector<TextRecord>& records);

// Runs `spec` over every record. With `dense` (the baseline's evaluation of the same records) the
// rise, KL and agreement compare each record with a dense pass of it; without, `spec` is the
// baseline. Throws Error(InvalidArgument) for a model without next-token logits, an empty
// dataset, a malformed spec, or a record of fewer than 2 tokens (named).
TextDatasetEval evaluate_text_dataset(const models::Model& model, const EncodedRecords& records,
                                      const std::vector<std::string>& names,
                                      const std::string& spec, const TextDatasetEval* dense,
                                      const DatasetEvalOptions& o = {});

// A row of a text dataset sweep table and its place in the full sweep (0: dense, which every
// shard runs: the paired rises need its per-record losses).
struct TextDatasetRow {
  int index = 0;
  TextDatasetEval eval;  // `record_loss` is not part of the table
};
// CSV in the order given; the rises are against the row of index 0 (Error(InvalidArgument)
// without one). An interval that does not exist (the baseline's rise) is an empty field.
std::string text_dataset_csv(const std::vector<TextDatasetRow>& rows);
bool is_text_dataset_csv(const std::string& text);
// Parses a table written by text_dataset_csv(); throws Error(Format) naming the file and line.
std::vector<TextDatasetRow> parse_text_dataset_csv(const std::string& text,
                                                   const std::string& source);
// Merges shard tables as merge_dataset_rows() does (the dense rows must agree).
std::vector<TextDatasetRow> merge_text_dataset_rows(
    const std::vector<std::vector<TextDatasetRow>>& shards);
// A row as a trade-off point: density and counted flops against the loss and its interval.
TradeoffPoint text_dataset_point(const TextDatasetEval& e);

}  // namespace attn::core
