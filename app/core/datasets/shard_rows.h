// The CSV tables of a dataset sweep (dataset_eval.h, text_dataset_eval.h), read and merged alike:
// rows carry their `index` in the full sweep, and row 0, the dense baseline, is in every shard
// (the paired intervals need it in each process).
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "compute/error.h"

namespace attn::core {

// Whether `text` starts with the table's header line.
bool has_header(const std::string& text, const char* header);

// One data line of a table: its fields, and its place ("source:line") for errors.
struct TableLine {
  std::string where;
  std::vector<std::string> fields;
};

// The data lines (blank ones skipped) of a table whose first line is `header`, each of `fields`
// fields. Throws Error(Format) naming `source` when the first line is another (`what` names the
// table: "dataset") or a line has another number of fields.
std::vector<TableLine> table_lines(const std::string& text, const char* header, size_t fields,
                                   const std::string& source, const std::string& what);

// The dense row (index 0), which the other rows are compared with; Error(InvalidArgument) with
// `missing` when the table has none.
template <class Row>
const Row& dense_row(const std::vector<Row>& rows, const std::string& missing) {
  const auto base =
      std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.index == 0; });
  require(base != rows.end(), ErrorCode::InvalidArgument, missing);
  return *base;
}

// Sorted by index, the baseline once. `differs(a, b)` returns why two shards' baselines disagree
// ("" when they agree). Throws Error(Format) for disagreeing baselines, no baseline, an index in
// two shards, or a missing one (an absent shard).
template <class Row, class Differs>
std::vector<Row> merge_shard_rows(const std::vector<std::vector<Row>>& shards, Differs differs) {
  std::vector<Row> all;
  const Row* base = nullptr;
  for (size_t s = 0; s < shards.size(); ++s)
    for (const Row& r : shards[s]) {
      if (r.index == 0 && base) {
        const std::string why = differs(*base, r);
        require(why.empty(), ErrorCode::Format,
                "shard " + std::to_string(s) + "'s dense row differs from the first shard's (" +
                    why + "): not the same dataset or model");
        continue;
      }
      if (r.index == 0) base = &r;
      all.push_back(r);
    }
  require(base != nullptr, ErrorCode::Format, "no shard holds the dense row (index 0)");
  std::sort(all.begin(), all.end(), [](const Row& a, const Row& b) { return a.index < b.index; });
  for (size_t i = 0; i < all.size(); ++i) {
    require(i == 0 || all[i].index != all[i - 1].index, ErrorCode::Format,
            "dataset row " + std::to_string(all[i].index) + " appears in two shards");
    require(all[i].index == int(i), ErrorCode::Format,
            "dataset row " + std::to_string(i) + " is missing: is a shard absent?");
  }
  return all;
}

}  // namespace attn::core
