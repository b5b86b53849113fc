// SentencePiece tokenizer.model (SentencePieceTokenizer, libsentencepiece's protobuf underneath):
// BPE and Unigram models, byte fallback, control pieces. A tokenizer that loads is run on fixed
// texts (tokenizer_checks.h).
#include "models/tokenizers/sentencepiece_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("tokenizer.model", {data, size});
  fuzz::refuse_only_with_attn_error(
      [&] { fuzz::exercise_tokenizer(models::SentencePieceTokenizer(path)); });
  return 0;
}
