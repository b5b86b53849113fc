// Any text given to the tokenizers users meet: the default text model's tokenizer.json, the
// reference GPT-2 (vocab.json + merges.txt) and BERT (vocab.txt) files, and a SentencePiece
// model when the corpus folder holds one. Spans, ids and decode are checked
// (tokenizer_checks.h).
#include <filesystem>
#include <memory>
#include <vector>

#include "models/tokenizers/bert_vocab.h"
#include "models/tokenizers/gpt2_files.h"
#include "models/tokenizers/sentencepiece_tokenizer.h"
#include "models/tokenizers/tokenizer_json.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

using namespace attn;

namespace {
std::vector<std::unique_ptr<models::Tokenizer>>& tokenizers() {
  static std::vector<std::unique_ptr<models::Tokenizer>> all;
  return all;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string src = fuzz::source_dir();
  auto& all = tokenizers();
  all.push_back(
      models::load_tokenizer_json(src + "/assets/models/default-text/tokenizer.json",
                                  src + "/assets/models/default-text/tokenizer_config.json"));
  all.push_back(models::load_gpt2_bpe(src + "/tests/ref/goldens/gpt2/vocab.json",
                                      src + "/tests/ref/goldens/gpt2/merges.txt"));
  all.push_back(models::load_bert_vocab(src + "/tests/ref/goldens/bert/vocab.txt"));
  all.push_back(
      models::load_bert_vocab(src + "/tests/ref/goldens/bert/vocab.txt", {.do_lower_case = false}));
  // Trained when the seed corpora are made (needs python3-sentencepiece); optional.
  const std::string sp = ATTN_FUZZ_SENTENCEPIECE_MODEL;
  if (std::filesystem::exists(sp))
    all.push_back(std::make_unique<models::SentencePieceTokenizer>(sp));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  for (const auto& tok : tokenizers()) fuzz::check_encode(*tok, text);
  return 0;
}
