// Pre-tokenizers of the Hugging Face pipeline: split normalised text into pieces that the model
// tokenises independently (words, regex matches, digits), each piece still aligned to the input.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "models/tokenizers/normalized_text.h"

namespace attn::models {

// How a split treats the matched parts (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their sub-pieces. `at_text_start` is true for the segment that begins
  // the input (segments are the text between special tokens).
  virtual void split(std::vector<NormalizedText>& pieces, bool at_text_start) const = 0;
  // True when the pieces reaching the model are to be read as bytes of GPT-2's byte alphabet.
  virtual bool byte_level() const { return false; }
};

// GPT-2's pre-tokenizer: optional prefix space, the GPT-2 regex split, byte alphabet.
std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex);
// BERT's: split on white space (dropped) and isolate each punctuation character.
std::unique_ptr<PreTokenizer> make_bert_pre_tokenizer();

// From a tokenizer.json "pre_tokenizer" object: ByteLevel, Split, Sequence, Digits, Whitespace,
// WhitespaceSplit, BertPreTokenizer, Punctuation, Metaspace. Returns nullptr for null; throws
// Error(Unsupported) naming other types.
std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const nlohmann::json& j);

// The split pattern of GPT-2's ByteLevel pre-tokenizer.
extern const char* const kGpt2SplitPattern;

}  // namespace attn::models
