// A tokenizer.json pattern, {"String": literal} or {"Regex": pattern}, as used by the Split
// pre-tokenizer and the Replace normalizer and decoder.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/tokenizers/regex.h"

namespace attn::models {

class SplitPattern {
 public:
  // Throws Error(Format) naming `where` when `j` is neither form or the regex does not compile.
  static SplitPattern from_json(const nlohmann::json& j, const std::string& where);
  static SplitPattern literal(std::string s);
  static SplitPattern regex(const std::string& pattern);

  // Non-overlapping, non-empty matches, leftmost first.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

}  // namespace attn::models
