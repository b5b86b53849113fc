// BERT's original tokenizer file: vocab.txt, one WordPiece token per line (id = line number).
#pragma once
#include <memory>
#include <string>

#include "models/tokenizers/pipeline_tokenizer.h"

namespace attn::models {

struct BertVocabOptions {
  bool do_lower_case = true;          // uncased models; tokenizer_config.json's do_lower_case
  std::optional<bool> strip_accents;  // unset: follow do_lower_case
  bool tokenize_chinese_chars = true;
};

// Builds BERT's tokenizer: BasicTokenizer rules (clean text, CJK split, lower case + accent
// strip, punctuation split), WordPiece with [UNK] and "##", [CLS] ... [SEP] on encode.
// [PAD], [UNK], [CLS], [SEP], [MASK] found in the vocabulary are special tokens.
std::unique_ptr<PipelineTokenizer> load_bert_vocab(const std::string& vocab_txt,
                                                   const BertVocabOptions& options = {});

}  // namespace attn::models
