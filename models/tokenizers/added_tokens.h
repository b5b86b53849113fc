// Added tokens (tokenizer.json "added_tokens", special tokens such as <|endoftext|> or
// <|begin_of_text|>): found in the raw text before normalisation and pre-tokenisation, leftmost
// first and longest among those starting at the same byte.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace attn::models {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;       // also takes the white space before it
  bool rstrip = false;       // also takes the white space after it
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // recorded; matching is always on the raw text
};

class AddedVocabulary {
 public:
  void add(AddedToken token);
  bool empty() const { return tokens_.empty(); }

  struct Segment {
    size_t begin, end;  // bytes of the input
    int32_t id = -1;    // the added token, or -1 for ordinary text
  };
  // Cuts `text` into ordinary text and added tokens; with !parse_special, special tokens are
  // left as ordinary text.
  std::vector<Segment> split(std::string_view text, bool parse_special) const;

  std::optional<int32_t> id_of(std::string_view content) const;
  // The added token with `id`, or nullptr.
  const AddedToken* by_id(int32_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  std::vector<std::vector<size_t>> by_first_byte_ = std::vector<std::vector<size_t>>(256);
};

}  // namespace attn::models
