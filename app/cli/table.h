// Plain-text tables for terminal output: columns sized to their widest cell.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

namespace attn::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::FILE* out = stdout) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Number formatting helpers for table cells.
std::string fixed(double x, int decimals);
std::string sci(double x);
// A byte count in B, KiB, MiB or GiB ("1.5 MiB").
std::string human_bytes(double bytes);

}  // namespace attn::cli
