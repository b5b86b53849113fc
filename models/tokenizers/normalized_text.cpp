#include "models/tokenizers/normalized_text.h"

#include "models/tokenizers/unicode.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {

NormalizedText::NormalizedText(std::string_view text, size_t offset)
    : text_(text), begin_(text.size()), end_(text.size()), start_(offset) {
  // Unchanged bytes map to themselves, so a byte-level token inside a character gets its bytes.
  for (size_t k = 0; k < text.size(); ++k) {
    begin_[k] = uint32_t(offset + k);
    end_[k] = uint32_t(offset + k + 1);
  }
}

std::pair<size_t, size_t> NormalizedText::input_span(size_t b, size_t e) const {
  if (b >= e) {
    const size_t at = b < begin_.size() ? begin_[b] : (end_.empty() ? start_ : end_.back());
    return {at, at};
  }
  return {begin_[b], end_[e - 1]};
}

NormalizedText NormalizedText::slice(size_t b, size_t e) const {
  NormalizedText out;
  out.text_ = text_.substr(b, e - b);
  out.begin_.assign(begin_.begin() + b, begin_.begin() + e);
  out.end_.assign(end_.begin() + b, end_.begin() + e);
  out.start_ = input_span(b, b).first;
  return out;
}

void NormalizedText::map_chars(const std::function<void(char32_t, std::u32string&)>& f) {
  std::string text;
  std::vector<uint32_t> begin, end;
  text.reserve(text_.size());
  std::u32string repl;
  size_t i = 0;
  while (i < text_.size()) {
    const size_t b = i;
    const char32_t c = utf8_next(text_, i);
    repl.clear();
    f(c, repl);
    if (repl.size() == 1 && repl[0] == c) {  // unchanged: keep the byte-wise alignment
      text.append(text_, b, i - b);
      begin.insert(begin.end(), begin_.begin() + b, begin_.begin() + i);
      end.insert(end.end(), end_.begin() + b, end_.begin() + i);
      continue;
    }
    for (char32_t r : repl) utf8_append(text, r);
    begin.resize(text.size(), begin_[b]);
    end.resize(text.size(), end_[i - 1]);
  }
  text_ = std::move(text);
  begin_ = std::move(begin);
  end_ = std::move(end);
}

void NormalizedText::map_runs(const std::function<bool(char32_t)>& boundary,
                              const std::function<std::string(const std::string&)>& f) {
  std::string text;
  std::vector<uint32_t> begin, end;
  size_t run = 0;
  auto flush = [&](size_t stop) {
    if (stop == run) return;
    const std::string src = text_.substr(run, stop - run);
    const std::string out = f(src);
    if (out == src) {  // unchanged: keep the byte-wise alignment
      begin.insert(begin.end(), begin_.begin() + run, begin_.begin() + stop);
      end.insert(end.end(), end_.begin() + run, end_.begin() + stop);
    } else {
      begin.resize(text.size() + out.size(), begin_[run]);
      end.resize(text.size() + out.size(), end_[stop - 1]);
    }
    text += out;
    run = stop;
  };
  size_t i = 0;
  while (i < text_.size()) {
    const size_t b = i;
    const char32_t c = utf8_next(text_, i);
    if (b > run && boundary(c)) flush(b);
  }
  flush(text_.size());
  text_ = std::move(text);
  begin_ = std::move(begin);
  end_ = std::move(end);
}

void NormalizedText::prepend(std::string_view s) {
  const uint32_t at = uint32_t(input_span(0, 0).first);
  text_.insert(0, s);
  begin_.insert(begin_.begin(), s.size(), at);
  end_.insert(end_.begin(), s.size(), at);
}

void NormalizedText::replace_all(std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t p = text_.find(from); p != std::string::npos; p = text_.find(from, p + from.size())) {
    matches.emplace_back(p, p + from.size());
  }
  replace_ranges(matches, to);
}

void NormalizedText::replace_ranges(const std::vector<std::pair<size_t, size_t>>& matches,
                                    std::string_view to) {
  if (matches.empty()) return;
  std::string text;
  std::vector<uint32_t> begin, end;
  size_t pos = 0;
  for (auto [b, e] : matches) {
    text.append(text_, pos, b - pos);
    begin.insert(begin.end(), begin_.begin() + pos, begin_.begin() + b);
    end.insert(end.end(), end_.begin() + pos, end_.begin() + b);
    const auto span = input_span(b, e);
    text.append(to);
    begin.resize(text.size(), uint32_t(span.first));
    end.resize(text.size(), uint32_t(span.second));
    pos = e;
  }
  text.append(text_, pos, std::string::npos);
  begin.insert(begin.end(), begin_.begin() + pos, begin_.end());
  end.insert(end.end(), end_.begin() + pos, end_.end());
  text_ = std::move(text);
  begin_ = std::move(begin);
  end_ = std::move(end);
}

void NormalizedText::strip(bool left, bool right) {
  size_t b = 0, e = text_.size();
  if (left) {
    size_t i = 0;
    while (i < text_.size()) {
      const size_t at = i;
      if (!unicode::is_whitespace(utf8_next(text_, i))) {
        b = at;
        break;
      }
      b = i;
    }
  }
  if (right) {
    while (e > b) {
      size_t s = e - 1;
      while (s > b && (static_cast<unsigned char>(text_[s]) & 0xC0) == 0x80) --s;
      size_t i = s;
      if (!unicode::is_whitespace(utf8_next(text_, i))) break;
      e = s;
    }
  }
  if (b != 0 || e != text_.size()) *this = slice(b, e);
}

}  // namespace attn::models
