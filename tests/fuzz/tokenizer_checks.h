// What the tokenizer targets do with a tokenizer that loaded: encode a fixed set of texts (ASCII,
// accents, CJK, emoji, control characters, special-token strings, empty) with and without
// special tokens, and check what Tokenizer documents: spans inside the text and in order, ids
// inside the vocabulary, and decode / id_to_piece accepting every id that encode produced.
#pragma once
#include <string>
#include <string_view>

#include "models/tokenizers/tokenizer.h"

namespace attn::fuzz {

// Encodes `text` both ways and checks the result (aborts on a broken property).
void check_encode(const models::Tokenizer& tok, std::string_view text);
// check_encode() over the fixed texts, then id_to_piece / token_to_id / is_special on the first
// ids of the vocabulary.
void exercise_tokenizer(const models::Tokenizer& tok);

}  // namespace attn::fuzz
