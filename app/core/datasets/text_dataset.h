// Text datasets: the records a corpus-level analysis (`attnscope heads --dataset`, `attnscope
// patch --dataset`) reads.
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

// Activation-patching pairs: JSONL, one {"clean": ..., "corrupt": ..., "target": ...,
// "foil": ...} object per line (strings). Throws like read_text_dataset, naming the line and the
// missing field.
struct PatchRecordText {
  std::string source;  // "pairs.jsonl:3"
  std::string clean, corrupt, target, foil;
};
std::vector<PatchRecordText> read_patch_dataset(const std::string& path);

}  // namespace attn::core
