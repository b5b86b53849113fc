// Text datasets: the records a corpus-level analysis (`attnscope heads --dataset`) reads.
//   JSONL   one JSON object per line with a string "text" ({"text": "..."}); blank lines skipped
//   folder  every regular file ending in .txt, in name order, one record each
#pragma once
#include <string>
#include <vector>

namespace attn::core {

struct TextRecord {
  std::string source;  // "data.jsonl:12" or "folder/a.txt": names the record in messages
  std::string text;
};

// Reads a JSONL file or a folder of .txt files. Throws Error(Io) for a path that cannot be read
// and Error(Format) naming the file and line of a malformed record (not JSON, not an object, no
// string "text"), or for a dataset without records.
std::vector<TextRecord> read_text_dataset(const std::string& path);

}  // namespace attn::core
