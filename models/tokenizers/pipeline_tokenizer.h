// The Hugging Face tokenizer pipeline: added tokens are cut out of the raw text, each remaining
// segment is normalised, pre-tokenized into pieces, and each piece is tokenised by the model;
// a post-processor wraps the result in special tokens. Byte spans follow every step.
#pragma once
#include <memory>

#include "models/tokenizers/added_tokens.h"
#include "models/tokenizers/decoder.h"
#include "models/tokenizers/normalizer.h"
#include "models/tokenizers/post_processor.h"
#include "models/tokenizers/pre_tokenizer.h"
#include "models/tokenizers/tokenizer.h"
#include "models/tokenizers/vocab_model.h"

namespace attn::models {

struct PipelineParts {
  std::string kind;                               // "bpe" or "wordpiece"
  std::unique_ptr<Normalizer> normalizer;         // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;    // may be null: each segment is one piece
  std::unique_ptr<VocabModel> model;              // required
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::unique_ptr<Decoder> decoder;               // may be null: pieces are concatenated
  AddedVocabulary added;
  SpecialTokens special;  // filled in further from the parts where left unset
};

class PipelineTokenizer : public Tokenizer {
 public:
  explicit PipelineTokenizer(PipelineParts parts);

  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const override;
  size_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view piece) const override;
  std::string id_to_piece(int32_t id) const override;
  bool is_special(int32_t id) const override;
  std::string kind() const override { return p_.kind; }

  const VocabModel& model() const { return *p_.model; }
  const AddedVocabulary& added_tokens() const { return p_.added; }

 protected:
  std::vector<Token> encode_valid(std::string_view text,
                                  const EncodeOptions& options) const override;

 private:
  PipelineParts p_;
  size_t vocab_size_ = 0;
};

}  // namespace attn::models
