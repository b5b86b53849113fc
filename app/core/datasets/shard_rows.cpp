#include "app/core/datasets/shard_rows.h"

#include <sstream>

#include "app/core/analysis/sweep.h"

namespace attn::core {

bool has_header(const std::string& text, const char* header) {
  return text.rfind(std::string(header) + "\n", 0) == 0 || text == header;
}

std::vector<TableLine> table_lines(const std::string& text, const char* header, size_t fields,
                                   const std::string& source, const std::string& what) {
  require(has_header(text, header), ErrorCode::Format,
          source + ": not an attnscope " + what + " table (first line must be the header '" +
              std::string(header) + "')");
  std::stringstream ss(text);
  std::string line;
  std::getline(ss, line);
  std::vector<TableLine> out;
  int n = 1;
  while (std::getline(ss, line)) {
    ++n;
    if (line.empty()) continue;
    TableLine l{source + ":" + std::to_string(n), split_csv_line(line)};
    require(l.fields.size() == fields, ErrorCode::Format,
            l.where + ": expected " + std::to_string(fields) + " fields, found " +
                std::to_string(l.fields.size()));
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace attn::core
