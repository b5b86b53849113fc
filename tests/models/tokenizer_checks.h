// Checks shared by the tokenizer tests.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "models/tokenizers/byte_level.h"
#include "models/tokenizers/tokenizer.h"
#include "models/tokenizers/utf8.h"

namespace attn::test {

inline std::vector<int32_t> ids_of(const std::vector<models::Token>& tokens) {
  std::vector<int32_t> ids;
  for (const models::Token& t : tokens) ids.push_back(t.id);
  return ids;
}

// Byte-level tokens: spans tile [0, text.size()) in order and each span holds exactly the bytes
// its piece stands for (special tokens: their own text).
inline void expect_byte_level_spans(const std::vector<models::Token>& tokens,
                                    const std::string& text) {
  size_t pos = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const models::Token& t = tokens[i];
    ASSERT_EQ(t.begin, pos) << "token " << i << " '" << t.piece << "' in '" << text << "'";
    ASSERT_LE(t.end, text.size());
    std::string bytes;
    if (t.special) {
      bytes = t.piece;
    } else {
      ASSERT_TRUE(models::byte_level::decode(t.piece, &bytes)) << t.piece;
    }
    EXPECT_EQ(text.substr(t.begin, t.end - t.begin), bytes) << "token " << i;
    pos = t.end;
  }
  EXPECT_EQ(pos, text.size()) << text;
}

// A random valid UTF-8 string drawn from a mix of scripts, digits, punctuation, emoji and
// white space runs.
inline std::string random_text(std::mt19937& rng, size_t chars) {
  static const std::u32string pool =
      U"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
      U"      \n\n\t.,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`"
      U"àéîõüñçßøåÆŒ"
      U"αβγδΩ"
      U"абвгдЖЯ"
      U"日本語中文字"
      U"한국어"
      U"عربية"
      U"हिन्दी"
      U"\u0301\u0308"
      U"😀👋🌍🎉❤️"
      U"\u00a0\u3000";
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  std::string out;
  for (size_t i = 0; i < chars; ++i) models::utf8_append(out, pool[pick(rng)]);
  return out;
}

}  // namespace attn::test
