// UTF-8 helpers for tokenizers: validation, code point iteration, encoding, lossy repair.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace attn::models {

// Index of the first byte that does not start a valid UTF-8 sequence (overlongs, surrogates and
// values past U+10FFFF are invalid), or npos when `text` is valid.
size_t utf8_invalid_at(std::string_view text);

// Decodes the code point at `text[i]` (which must be valid UTF-8) and advances `i` past it.
char32_t utf8_next(std::string_view text, size_t& i);

// Length in bytes of the sequence whose lead byte is `lead` (1 for continuation bytes).
size_t utf8_len(unsigned char lead);

void utf8_append(std::string& out, char32_t cp);

// Replaces every invalid sequence by U+FFFD, one per maximal invalid subpart, as Python's
// bytes.decode("utf-8", errors="replace") does.
std::string utf8_repair(std::string_view bytes);

}  // namespace attn::models
