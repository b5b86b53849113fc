// Display text of tokens and variants, used by every view, figure and table.
#pragma once
#include <string>
#include <vector>

#include "models/tokenizers/tokenizer.h"

namespace attn::core {

// A token piece with the tokenizers' space and newline markers made visible: byte-level BPE's
// "Ġ"/"Ċ" and SentencePiece's "▁" become "·" and "¶".
std::string display_piece(const std::string& piece);

// Display label of each token: its text from `text` by byte span, trimmed ("·" for a space,
// "↵" for a newline when that is all it holds), else display_piece() of its piece.
std::vector<std::string> token_labels(const std::string& text,
                                      const std::vector<models::Token>& tokens,
                                      const std::vector<std::string>& pieces);

// The two parts of a caption: display names ("Sinks + window (StreamingLLM)") and parameters
// ("sinks=4, window=256"; pieces of a composite spec separated by "; ").
struct VariantLabel {
  std::string name;
  std::string params;
};
VariantLabel variant_label(const std::string& spec);
// "Sliding window [size=16]"; "Dense softmax" for dense.
std::string variant_caption(const std::string& spec);

}  // namespace attn::core
