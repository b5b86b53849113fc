// JSONL datasets (read_text_dataset, read_patch_dataset): any bytes as a .jsonl file. A file that
// reads names each record by its line, in order; its records written back as JSONL read the same.
#include <nlohmann/json.hpp>

#include "app/core/datasets/text_dataset.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

namespace {

// "in.jsonl:12" -> 12 (the records' sources name the file and the line).
long line_of(const std::string& source, const std::string& path) {
  fuzz::check(source.rfind(path + ":", 0) == 0, "a record's source does not name the file");
  return std::stol(source.substr(path.size() + 1));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("in.jsonl", {data, size});
  fuzz::refuse_only_with_attn_error([&] {
    const std::vector<core::TextRecord> texts = core::read_text_dataset(path);
    fuzz::check(!texts.empty(), "a dataset read without records");
    long last = 0;
    std::string again;
    for (const core::TextRecord& r : texts) {
      const long line = line_of(r.source, path);
      fuzz::check(line > last, "records out of line order");
      last = line;
      again += nlohmann::json{{"text", r.text}}.dump() + "\n";
    }
    const std::string copy = fuzz::write_scratch("again.jsonl", again);
    const std::vector<core::TextRecord> back = core::read_text_dataset(copy);
    fuzz::check(back.size() == texts.size(), "a written-back dataset has another record count");
    for (size_t i = 0; i < back.size(); ++i)
      fuzz::check(back[i].text == texts[i].text, "a written-back record reads differently");
  });
  fuzz::refuse_only_with_attn_error([&] {
    const std::vector<core::PatchRecordText> pairs = core::read_patch_dataset(path);
    fuzz::check(!pairs.empty(), "a pair dataset read without records");
    long last = 0;
    for (const core::PatchRecordText& r : pairs) {
      const long line = line_of(r.source, path);
      fuzz::check(line > last, "pairs out of line order");
      last = line;
    }
  });
  return 0;
}
