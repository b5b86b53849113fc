// Normalizers of the Hugging Face tokenizer pipeline: rewrite the text before it is split,
// keeping each byte aligned to the input (NormalizedText).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/tokenizers/normalized_text.h"

namespace attn::models {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(NormalizedText& text) const = 0;
};

// BERT's text cleaning: drop NUL, U+FFFD and control characters, turn white space into ' ',
// space out CJK ideographs, and when lower-casing also strip accents (NFD, drop Mn) unless
// `strip_accents` says otherwise.
struct BertNormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  std::optional<bool> strip_accents;  // unset: follow `lowercase`
  bool lowercase = true;
};
std::unique_ptr<Normalizer> make_bert_normalizer(const BertNormalizerOptions& options);

// From a tokenizer.json "normalizer" object: NFC, NFD, NFKC, NFKD, Lowercase, StripAccents,
// BertNormalizer, Prepend, Replace, Strip, Sequence. Returns nullptr for null. Throws
// Error(Unsupported) naming the type for others (e.g. SentencePiece's Precompiled).
std::unique_ptr<Normalizer> normalizer_from_json(const nlohmann::json& j);

}  // namespace attn::models
