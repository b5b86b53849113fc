// GPT-2's vocab.json + merges.txt (load_gpt2_bpe). Input: vocab.json, a NUL byte, merges.txt
// (no NUL: all of it is vocab.json and merges.txt is empty). A tokenizer that loads is run on
// fixed texts (tokenizer_checks.h).
#include "models/tokenizers/gpt2_files.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all = fuzz::as_text(data, size);
  const size_t nul = all.find('\0');
  const std::string vocab = fuzz::write_scratch("vocab.json", all.substr(0, nul));
  const std::string merges = fuzz::write_scratch(
      "merges.txt", nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1));
  fuzz::refuse_only_with_attn_error(
      [&] { fuzz::exercise_tokenizer(*models::load_gpt2_bpe(vocab, merges)); });
  return 0;
}
