#include "models/tokenizers/byte_level.h"

#include "models/tokenizers/utf8.h"

namespace attn::models::byte_level {
namespace {

struct Alphabet {
  std::array<std::string, 256> chars;
  std::array<char32_t, 256> cps;
  Alphabet() {
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      cps[b] = printable ? char32_t(b) : char32_t(256 + next++);
      utf8_append(chars[b], cps[b]);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

const std::string& char_for_byte(uint8_t b) {
  return alphabet().chars[b];
}

std::optional<uint8_t> byte_for_char(char32_t c) {
  // Printable bytes stand for themselves; the 68 others are U+0100..U+0143 in byte order.
  static const std::array<int, 68> others = [] {
    std::array<int, 68> o{};
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      if (alphabet().cps[b] >= 256) o[n++] = b;
    }
    return o;
  }();
  if (c < 256) {
    if (alphabet().cps[c] == c) return uint8_t(c);
    return std::nullopt;
  }
  if (c < 256 + others.size()) return uint8_t(others[c - 256]);
  return std::nullopt;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += char_for_byte(b);
  return out;
}

bool decode(std::string_view text, std::string* bytes) {
  size_t i = 0;
  bool ok = true;
  while (i < text.size()) {
    const size_t start = i;
    const auto b = byte_for_char(utf8_next(text, i));
    if (b) {
      *bytes += char(*b);
    } else {
      bytes->append(text.substr(start, i - start));  // not from the alphabet: keep as is
      ok = false;
    }
  }
  return ok;
}

}  // namespace attn::models::byte_level
