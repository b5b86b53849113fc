// Text and token ids prepared for a model: tokenised with the model folder's tokenizer,
// labelled for display, and cut to the model's context with a visible notice.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/arch/model.h"

namespace attn::models {

struct TextInput {
  std::vector<int32_t> ids;         // i32 [N]
  std::vector<std::string> labels;  // [N] token pieces (or "#id" without a tokenizer)
  std::vector<Token> tokens;        // [N] with byte spans (empty when fed ids)
  bool truncated = false;
  std::string notice;  // what truncation dropped, for the user; empty otherwise
};

// Tokenises `text` (special tokens as the tokenizer's files ask). `source` names the text in
// messages ("--text-file notes.txt"). Throws Error(InvalidArgument) for empty text, text that is
// not UTF-8 (naming the byte offset), text over kMaxInputTextBytes, or a model without a
// tokenizer; keeps the first max_tokens tokens (at most kMaxInputTokens, limits.h) when longer,
// with a notice.
TextInput encode_for_model(const Model& model, std::string_view text,
                           const std::string& source = "text");

// Checks ids against the vocabulary (Error(InvalidArgument) naming the first bad one), labels
// them, and truncates as above.
TextInput ids_for_model(const Model& model, std::vector<int32_t> ids);

}  // namespace attn::models
