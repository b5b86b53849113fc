// The vocabulary model at the heart of a pipeline tokenizer (BPE, WordPiece): turns one
// pre-tokenized piece into vocabulary ids with byte ranges inside the piece.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

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

}  // namespace attn
