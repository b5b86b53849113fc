#include "models/tokenizers/split_pattern.h"

#include "compute/error.h"

namespace attn::models {

SplitPattern SplitPattern::from_json(const nlohmann::json& j, const std::string& where) {
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    return literal(j["String"].get<std::string>());
  }
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    return regex(j["Regex"].get<std::string>());
  }
  throw Error(ErrorCode::Format, where + ": pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

SplitPattern SplitPattern::literal(std::string s) {
  SplitPattern p;
  p.literal_ = std::move(s);
  return p;
}

SplitPattern SplitPattern::regex(const std::string& pattern) {
  SplitPattern p;
  p.regex_ = std::make_shared<const Regex>(pattern);
  return p;
}

std::vector<std::pair<size_t, size_t>> SplitPattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_.empty()) return out;
  for (size_t p = text.find(literal_); p != std::string_view::npos;
       p = text.find(literal_, p + literal_.size())) {
    out.emplace_back(p, p + literal_.size());
  }
  return out;
}

}  // namespace attn::models
