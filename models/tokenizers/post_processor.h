// Post-processors: the special tokens wrapped around an encoded text when add_special_tokens is
// on (BOS for Llama 3, [CLS] ... [SEP] for BERT, <s> ... </s> for RoBERTa).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "models/tokenizers/tokenizer.h"

namespace attn::models {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds special tokens around `tokens` (the encoding of a text of `text_size` bytes).
  virtual void process(std::vector<Token>& tokens, size_t text_size) const = 0;
  // The ids this processor adds in front and at the end, for SpecialTokens (bos/cls, eos/sep).
  virtual std::vector<Token> prefix() const = 0;
  virtual std::vector<Token> suffix() const = 0;
};

// A fixed prefix and suffix (BertProcessing, RobertaProcessing, TemplateProcessing's single).
std::unique_ptr<PostProcessor> make_wrap_post_processor(std::vector<Token> prefix,
                                                        std::vector<Token> suffix);

// From a tokenizer.json "post_processor": TemplateProcessing, BertProcessing, RobertaProcessing,
// ByteLevel (adds nothing), Sequence. nullptr for null; Error(Unsupported) for other types.
std::unique_ptr<PostProcessor> post_processor_from_json(const nlohmann::json& j);

}  // namespace attn::models
