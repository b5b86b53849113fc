#include "models/tokenizers/added_tokens.h"

#include <algorithm>
#include <cctype>

#include "models/tokenizers/unicode.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {
namespace {

// The code point that ends just before byte `at` (text is valid UTF-8).
char32_t char_before(std::string_view text, size_t at) {
  size_t s = at - 1;
  while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
  return utf8_next(text, s);
}

bool is_word_char(char32_t c) {
  return c == '_' || (c < 0x80 ? std::isalnum(int(c)) != 0
                               : !unicode::is_whitespace(c) && !unicode::is_bert_punctuation(c));
}

}  // namespace

void AddedVocabulary::add(AddedToken token) {
  if (token.content.empty()) return;
  auto existing = by_content_.find(token.content);
  if (existing != by_content_.end()) {
    tokens_[existing->second] = token;
  } else {
    by_content_[token.content] = tokens_.size();
    tokens_.push_back(token);
    by_first_byte_[static_cast<unsigned char>(token.content[0])].push_back(tokens_.size() - 1);
  }
  by_id_[token.id] = by_content_[token.content];
  // Longest first, so the first match at a position is the longest.
  auto& list = by_first_byte_[static_cast<unsigned char>(token.content[0])];
  std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
    return tokens_[a].content.size() > tokens_[b].content.size();
  });
}

std::vector<AddedVocabulary::Segment> AddedVocabulary::split(std::string_view text,
                                                             bool parse_special) const {
  std::vector<Segment> out;
  size_t text_start = 0;  // start of the pending ordinary text
  size_t i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (size_t idx : by_first_byte_[static_cast<unsigned char>(text[i])]) {
      const AddedToken& t = tokens_[idx];
      if (t.special && !parse_special) continue;
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      if (t.single_word) {
        const size_t e = i + t.content.size();
        if (i > 0 && is_word_char(char_before(text, i))) continue;
        if (e < text.size()) {
          size_t k = e;
          if (is_word_char(utf8_next(text, k))) continue;
        }
      }
      hit = &t;
      break;
    }
    if (!hit) {
      i += utf8_len(static_cast<unsigned char>(text[i]));
      continue;
    }
    size_t b = i, e = i + hit->content.size();
    if (hit->lstrip) {
      while (b > text_start) {
        const char32_t c = char_before(text, b);
        if (!unicode::is_whitespace(c)) break;
        size_t s = b - 1;
        while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        b = s;
      }
    }
    if (hit->rstrip) {
      while (e < text.size()) {
        size_t k = e;
        if (!unicode::is_whitespace(utf8_next(text, k))) break;
        e = k;
      }
    }
    if (b > text_start) out.push_back({text_start, b, -1});
    out.push_back({b, e, hit->id});
    text_start = i = e;
  }
  if (text_start < text.size()) out.push_back({text_start, text.size(), -1});
  return out;
}

std::optional<int32_t> AddedVocabulary::id_of(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace attn::models
