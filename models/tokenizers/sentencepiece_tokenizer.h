// SentencePiece models (tokenizer.model: Llama 2, TinyLlama, T5, ...) run by libsentencepiece,
// with byte spans from its own alignment of pieces to the input.
#pragma once
#include <memory>
#include <string>

#include "models/tokenizers/added_tokens.h"
#include "models/tokenizers/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace attn::models {

struct SentencePieceOptions {
  std::optional<bool> add_bos;  // unset: add BOS when the model has one
  bool add_eos = false;
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws Error(Io) when unreadable, Error(Format) when libsentencepiece rejects the file.
  explicit SentencePieceTokenizer(const std::string& model_path,
                                  const SentencePieceOptions& options = {});
  ~SentencePieceTokenizer() override;

  std::string decode(std::span<const int32_t> ids, bool skip_special = true) const override;
  size_t vocab_size() const override;
  std::optional<int32_t> token_to_id(std::string_view piece) const override;
  std::string id_to_piece(int32_t id) const override;
  bool is_special(int32_t id) const override;
  std::string kind() const override { return "sentencepiece"; }

 protected:
  std::vector<Token> encode_valid(std::string_view text,
                                  const EncodeOptions& options) const override;

 private:
  void check_id(int32_t id) const;
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  AddedVocabulary control_;  // control and unknown pieces (<s>, </s>, <unk>) found in text
  bool add_bos_ = true;
  bool add_eos_ = false;
};

}  // namespace attn::models
