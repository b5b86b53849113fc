// tokenizer.json (load_tokenizer_json): model (BPE, WordPiece; others refused), vocabulary and
// merges, normalizer, pre-tokenizer (incl. Split regexes), added tokens, post-processor,
// decoder. A tokenizer that loads is run on fixed texts (tokenizer_checks.h).
#include "models/tokenizers/tokenizer_json.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("tokenizer.json", {data, size});
  fuzz::refuse_only_with_attn_error(
      [&] { fuzz::exercise_tokenizer(*models::load_tokenizer_json(path)); });
  return 0;
}
