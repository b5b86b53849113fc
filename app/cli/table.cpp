#include "app/cli/table.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace attn::cli {

namespace {

// Numbers (and "1.23x", "n/a", "-") align right; text aligns left.
bool numeric_cell(const std::string& c) {
  if (c.empty() || c == "-" || c == "n/a") return true;
  char* end = nullptr;
  std::strtod(c.c_str(), &end);
  return end != c.c_str() &&
         (*end == 0 || (end[0] == 'x' && end[1] == 0) || (end[0] == '%' && end[1] == 0));
}

}  // namespace

void Table::print(std::FILE* out) const {
  std::vector<bool> right(rows_[0].size(), true);
  for (size_t i = 1; i < rows_.size(); ++i)
    for (size_t c = 0; c < rows_[i].size() && c < right.size(); ++c)
      right[c] = right[c] && numeric_cell(rows_[i][c]);
  std::vector<size_t> width;
  for (const auto& r : rows_) {
    width.resize(std::max(width.size(), r.size()), 0);
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < r.size(); ++c)
      std::fprintf(out, "%s%*s", c == 0 ? "" : "  ",
                   (c < right.size() && right[c]) ? int(width[c]) : -int(width[c]), r[c].c_str());
    std::fputc('\n', out);
  };
  line(rows_[0]);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  std::fprintf(out, "%s\n", std::string(total > 2 ? total - 2 : 0, '-').c_str());
  for (size_t i = 1; i < rows_.size(); ++i) line(rows_[i]);
}

std::string fixed(double x, int decimals) {
  if (std::isnan(x)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

std::string sci(double x) {
  if (std::isnan(x)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", x);
  return buf;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  return fixed(b, u == 0 ? 0 : 1) + " " + units[u];
}

}  // namespace attn::cli
