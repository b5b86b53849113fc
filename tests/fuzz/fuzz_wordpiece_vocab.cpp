// BERT's vocab.txt (load_bert_vocab), cased and uncased. A tokenizer that loads is run on fixed
// texts (tokenizer_checks.h).
#include "models/tokenizers/bert_vocab.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/tokenizer_checks.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("vocab.txt", {data, size});
  for (const bool lower : {true, false}) {
    fuzz::refuse_only_with_attn_error([&] {
      models::BertVocabOptions options;
      options.do_lower_case = lower;
      fuzz::exercise_tokenizer(*load_bert_vocab(path, options));
    });
  }
  return 0;
}
