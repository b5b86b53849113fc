// Text being normalised and split, with every byte aligned to the span of the input text it came
// from, so that tokens made from normalised text still report byte spans into the input.
// Bytes left unchanged map to themselves; bytes of a rewritten character (lower-cased, composed,
// replaced) all map to the whole input span of what they replace.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::models {

class NormalizedText {
 public:
  NormalizedText() = default;
  // `text` unchanged; byte i maps to the input span of its character, shifted by `offset`.
  NormalizedText(std::string_view text, size_t offset);

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  size_t size() const { return text_.size(); }

  // Input span [begin, end) of normalised bytes [b, e). An empty range maps to an empty span.
  std::pair<size_t, size_t> input_span(size_t b, size_t e) const;

  // Bytes [b, e) as a new text (b and e on character boundaries).
  NormalizedText slice(size_t b, size_t e) const;

  // Rewrites each code point into zero or more code points; new bytes take the input span of the
  // code point they replace.
  void map_chars(const std::function<void(char32_t, std::u32string&)>& f);
  // Applies `f` to runs of whole code points (cut where `boundary` allows); the bytes of each
  // rewritten run take the input span of the whole run (used for NFC/NFKC, which compose).
  void map_runs(const std::function<bool(char32_t)>& boundary,
                const std::function<std::string(const std::string&)>& f);
  // Inserts `s` before the text; its bytes get the empty span at the start of the first character.
  void prepend(std::string_view s);
  // Replaces every occurrence of the literal `from` by `to`; new bytes take the span of the match.
  void replace_all(std::string_view from, std::string_view to);
  // Replaces the byte ranges `matches` (sorted, disjoint) by `to`.
  void replace_ranges(const std::vector<std::pair<size_t, size_t>>& matches, std::string_view to);
  // Removes leading/trailing white space.
  void strip(bool left, bool right);

 private:
  std::string text_;
  std::vector<uint32_t> begin_;  // per byte: start of the input span it comes from
  std::vector<uint32_t> end_;    // per byte: end of the input span it comes from
  size_t start_ = 0;             // input offset of the text's start (spans of empty ranges)
};

}  // namespace attn::models
