// Parameter sweeps for trade-off curves: a sweep spec expands to concrete variant specs, the
// work splits into shards for cluster array jobs, and shard CSVs merge back into one table.
//
// Sweep spec: a variant spec whose parameter values may be ranges or lists:
//   "window(size=16..1024:x2)"        16, 32, ..., 1024 (geometric, factor 2)
//   "block_topk(block=64,k=2..8:+2)"  k = 2, 4, 6, 8 (arithmetic, step 2)
//   "top_p(p=0.5|0.9|0.99)"           a list
// Several ranges in one spec expand to their Cartesian product (first parameter slowest).
#pragma once
#include <string>
#include <vector>

#include "app/core/analysis/views.h"

namespace attn::core {

// Expands one sweep spec; throws Error(InvalidArgument) naming the malformed range.
std::vector<std::string> expand_sweep(const std::string& sweep_spec);
// Expands each and concatenates (order kept, duplicates removed).
std::vector<std::string> expand_sweeps(const std::vector<std::string>& sweep_specs);
// The rows of a sweep table: "dense" first (the baseline: density 1, error 0, measured in the same
// run, so that a plot of the table alone is complete), then expand_sweeps() without "dense".
std::vector<std::string> sweep_table_specs(const std::vector<std::string>& sweep_specs);

struct Shard {
  int index = 0, count = 1;  // this shard is `index` of `count` (0-based)
};
// Parses "i/n" (0 <= i < n); throws Error(InvalidArgument).
Shard parse_shard(const std::string& s);
// Indices of the items a shard owns: i, i + n, i + 2n, ... below `n_items`.
std::vector<int> shard_items(int n_items, const Shard& shard);

// One row of the sweep table: the point plus its position in the full sweep (0: the dense
// baseline).
struct SweepRow {
  int index = 0;
  TradeoffPoint point;
};

// One CSV line's fields (double quotes quote, "" inside quotes is a quote), and a field quoted.
std::vector<std::string> split_csv_line(const std::string& line);
std::string csv_quote(const std::string& s);
// Dataset tables' fields: a number as %.9g, or "" for NaN/infinite (an interval that does not
// exist); read back as NaN from "", else a finite-or-infinite number or Error(Format) naming
// `where`; a count is a whole number in [0, max].
std::string csv_field(double v);
double csv_number(const std::string& s, const std::string& where);
int64_t csv_count(const std::string& s, const std::string& where, double max);

// CSV of trade-off rows: a header line, then one line per row in the order given. Numbers use
// %.9g; NaN is written as "nan".
std::string tradeoff_csv(const std::vector<SweepRow>& rows);
// Parses a table written by tradeoff_csv(); throws Error(Format) naming the file and line.
std::vector<SweepRow> parse_tradeoff_csv(const std::string& text, const std::string& source);
// Merges shard tables: sorted by index; throws Error(Format) when an index appears twice or the
// indices are not 0..n-1 (a missing shard).
std::vector<SweepRow> merge_sweep_rows(const std::vector<std::vector<SweepRow>>& shards);

}  // namespace attn::core
