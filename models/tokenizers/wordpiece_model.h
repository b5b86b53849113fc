// WordPiece (BERT): greedy longest-match-first over a word, non-initial pieces spelled with a
// "##" prefix; a word with any unmatchable part, or longer than max_input_chars_per_word
// characters, becomes the unknown token as a whole.
#pragma once
#include <string>
#include <unordered_map>

#include "models/tokenizers/vocab_model.h"

namespace attn::models {

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel : public VocabModel {
 public:
  // Throws Error(Format) when the unknown token is not in `vocab`.
  WordPieceModel(std::unordered_map<std::string, int32_t> vocab, WordPieceOptions options);

  void tokenize(std::string_view piece, bool byte_level,
                std::vector<VocabToken>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  size_t size() const override { return id_to_token_.size(); }
  const WordPieceOptions& options() const { return options_; }

 private:
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  WordPieceOptions options_;
  int32_t unk_id_ = 0;
};

}  // namespace attn::models
