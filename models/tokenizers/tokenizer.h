// The common tokenizer interface: text in, tokens out, each token with its id, its vocabulary
// piece and the byte span of the input it stands for, so views can underline exactly the text a
// token covers.
//
// Implementations: PipelineTokenizer (Hugging Face tokenizer.json pipelines: byte-level BPE,
// regex-split BPE, WordPiece; also built from GPT-2's vocab.json + merges.txt and BERT's
// vocab.txt) and SentencePieceTokenizer (tokenizer.model). load_tokenizer() in factory.h picks one
// from a model folder.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn::models {

struct Token {
  int32_t id = 0;
  std::string piece;  // vocabulary string, e.g. "Ġworld", "##ing", "▁the", "<|endoftext|>"
  // Byte span [begin, end) of the input text. Byte-level tokens may split a multi-byte character
  // (then neighbouring spans share no byte but each covers part of it); tokens added by the
  // post-processor (BOS, [CLS], [SEP]) have an empty span at the start or end of the text.
  size_t begin = 0;
  size_t end = 0;
  bool special = false;  // a special token (added, or found in the text)
};

struct EncodeOptions {
  bool add_special_tokens = true;  // BOS / [CLS] ... [SEP] as the tokenizer's files ask
  bool parse_special = true;       // special-token strings in the text become special tokens
};

struct SpecialTokens {
  std::optional<int32_t> bos, eos, unk, pad, cls, sep, mask;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Tokenises `text`, which must be UTF-8 (throws Error(InvalidArgument) naming the first bad
  // byte otherwise). Empty text gives no tokens at all.
  std::vector<Token> encode(std::string_view text, const EncodeOptions& options = {}) const;
  std::vector<int32_t> encode_ids(std::string_view text, const EncodeOptions& options = {}) const;

  // Text for `ids`; bytes that do not form valid UTF-8 become U+FFFD. Throws
  // Error(InvalidArgument) for an id outside the vocabulary.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special = true) const = 0;

  // Number of ids (largest id + 1, added tokens included).
  virtual size_t vocab_size() const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view piece) const = 0;
  // Throws Error(InvalidArgument) for an id outside the vocabulary.
  virtual std::string id_to_piece(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  // "bpe", "wordpiece", "sentencepiece"
  virtual std::string kind() const = 0;

  const SpecialTokens& special_tokens() const { return special_; }

 protected:
  // `text` is non-empty, valid UTF-8.
  virtual std::vector<Token> encode_valid(std::string_view text,
                                          const EncodeOptions& options) const = 0;
  SpecialTokens special_;
};

}  // namespace attn::models
