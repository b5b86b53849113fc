// The vocabulary model at the heart of a pipeline tokenizer (BPE, WordPiece): turns one
// pre-tokenized piece into vocabulary ids with byte ranges inside the piece.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn::models {

struct VocabToken {
  int32_t id;
  size_t begin, end;  // bytes of the piece this token covers
};

class VocabModel {
 public:
  virtual ~VocabModel() = default;
  // Appends the tokens of `piece`. With `byte_level` the piece's bytes are looked up through
  // GPT-2's byte alphabet.
  virtual void tokenize(std::string_view piece, bool byte_level,
                        std::vector<VocabToken>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // Vocabulary string of `id`, or nullptr when the model has no such id.
  virtual const std::string* id_to_token(int32_t id) const = 0;
  // Largest id + 1.
  virtual size_t size() const = 0;
};

// Largest id of `vocab` + 1, after checking every id against [0, kMaxVocabId] and the ids'
// density (limits.h), since the models allocate an id -> token table of that size. Throws
// Error(Format) naming `what` ("BPE vocabulary"), the token, its id and the limit.
size_t checked_vocab_table_size(const std::unordered_map<std::string, int32_t>& vocab,
                                const std::string& what);

}  // namespace attn::models
