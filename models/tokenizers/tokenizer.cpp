#include "models/tokenizers/tokenizer.h"

#include <cstdio>

#include "compute/error.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {

std::vector<Token> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  if (text.empty()) return {};
  const size_t bad = utf8_invalid_at(text);
  if (bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(text[bad]));
    throw Error(ErrorCode::InvalidArgument, "tokenizer input is not valid UTF-8: byte " +
                                                std::to_string(bad) + " (" + hex + ")");
  }
  return encode_valid(text, options);
}

std::vector<int32_t> Tokenizer::encode_ids(std::string_view text,
                                           const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  for (const Token& t : encode(text, options)) ids.push_back(t.id);
  return ids;
}

}  // namespace attn::models
