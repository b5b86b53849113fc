// Attribution over a dataset (`attnscope attribute --dataset`): every record attributed with the
// same request, then the distribution over the records of each pair's rank agreement and each
// method's faithfulness, means with bootstrap 95% intervals. Records are kept as small summaries,
// so a sharded run (--shard i/n) writes its records and --merge joins the shards' records before
// summarising, giving the numbers one run would.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "app/core/attribution/attribution.h"
#include "app/core/attribution/faithfulness.h"
#include "app/core/datasets/dataset_analysis.h"

namespace attn::core {

// What one record contributes.
struct AttributionRecordSummary {
  int index = 0;
  std::string source;  // "data.jsonl:3", "t10k-images-idx3-ubyte.gz:17"
  int units = 0;       // ranked units
  double z = 0, probability = 0;
  int target = -1;  // the resolved target id or class
  int label = -1;   // images: the record's label (-1: none)
  std::vector<RankAgreement> agreement;
  std::vector<Curve> curves;  // areas only (the curves themselves are not kept)
};
AttributionRecordSummary summarize_record(const Attribution& a,
                                          const std::vector<RankAgreement>& agreement,
                                          const Faithfulness* f);

struct AttributionDatasetSummary {
  int records = 0;
  struct Pair {
    std::string a, b;
    Interval kendall_tau, spearman, top_k_overlap;
  };
  struct Order {
    std::string order;  // a method, or "random"
    Interval aopc_p, aopc_z, insertion_p, insertion_z;
  };
  std::vector<Pair> pairs;
  std::vector<Order> orders;  // empty without faithfulness
  Interval probability;       // of the target
};
// Throws Error(InvalidArgument) for no records or records of different methods.
AttributionDatasetSummary summarize_records(const std::vector<AttributionRecordSummary>& r,
                                            int bootstrap = 1000, uint64_t seed = 1234);

// The records (shard files) as JSON and back; `source` names the file in messages (Error(Format)).
nlohmann::json records_json(const std::vector<AttributionRecordSummary>& r);
std::vector<AttributionRecordSummary> records_from_json(const nlohmann::json& j,
                                                        const std::string& source);
nlohmann::json to_json(const AttributionDatasetSummary& s);

}  // namespace attn::core
