// A compiled PCRE2 pattern in UTF + UCP mode (so \p{L}, \s and \w follow Unicode), JIT-compiled
// when available. Used for the pre-tokenizer patterns of GPT-2, Llama 3, Qwen2 and others.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::models {

class Regex {
 public:
  // Throws Error(Format) with PCRE2's message and the offset when `pattern` does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges of all non-overlapping, non-empty matches in `subject` (valid UTF-8), leftmost
  // first. Safe to call from several threads at once.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace attn::models
