// GPT-2's byte-level alphabet: each of the 256 byte values is shown as one printable code point
// (printable Latin-1 bytes stand for themselves, the rest map to U+0100 onwards), so that a
// BPE vocabulary over bytes can be stored as text (space is "Ġ", newline "Ċ").
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attn::models::byte_level {

// UTF-8 of the code point standing for byte `b`.
const std::string& char_for_byte(uint8_t b);
// The byte a code point stands for, or nullopt for code points outside the alphabet.
std::optional<uint8_t> byte_for_char(char32_t c);
// Maps every byte of `bytes` to its alphabet character.
std::string encode(std::string_view bytes);
// Maps alphabet characters back to bytes; returns false if `text` has characters outside it.
bool decode(std::string_view text, std::string* bytes);

}  // namespace attn::models::byte_level
