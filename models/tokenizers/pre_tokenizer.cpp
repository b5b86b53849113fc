#include "models/tokenizers/pre_tokenizer.h"

#include <functional>

#include "compute/error.h"
#include "models/tokenizers/split_pattern.h"
#include "models/tokenizers/unicode.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {

const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using nlohmann::json;
using Ranges = std::vector<std::pair<size_t, size_t>>;

// Cuts `t` into pieces given the matched ranges and what to do with them.
void split_by_matches(const NormalizedText& t, const Ranges& matches, SplitBehavior behavior,
                      bool invert, std::vector<NormalizedText>& out) {
  // (begin, end, is_match) covering the whole text in order.
  struct Part {
    size_t b, e;
    bool match;
  };
  std::vector<Part> parts;
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) parts.push_back({pos, b, invert});
    parts.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < t.size()) parts.push_back({pos, t.size(), invert});

  std::vector<std::pair<size_t, size_t>> pieces;
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const Part& p : parts) {
        if (!p.match) pieces.emplace_back(p.b, p.e);
      }
      break;
    case SplitBehavior::Isolated:
      for (const Part& p : parts) pieces.emplace_back(p.b, p.e);
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool prev_gap = false;
      for (const Part& p : parts) {
        if (p.match && prev_gap) {
          pieces.back().second = p.e;
        } else {
          pieces.emplace_back(p.b, p.e);
        }
        prev_gap = !p.match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (!p.match && prev_match) {
          pieces.back().second = p.e;
        } else {
          pieces.emplace_back(p.b, p.e);
        }
        prev_match = p.match;
      }
      break;
    }
    case SplitBehavior::Contiguous: {
      bool prev_match = false;
      for (const Part& p : parts) {
        if (p.match && prev_match) {
          pieces.back().second = p.e;
        } else {
          pieces.emplace_back(p.b, p.e);
        }
        prev_match = p.match;
      }
      break;
    }
  }
  for (auto [b, e] : pieces) {
    if (e > b) out.push_back(t.slice(b, e));
  }
}

// Ranges of single characters (or runs of them, when `runs`) for which `pred` holds.
Ranges char_matches(const std::string& s, const std::function<bool(char32_t)>& pred, bool runs) {
  Ranges out;
  size_t i = 0;
  bool prev = false;
  while (i < s.size()) {
    const size_t b = i;
    const bool hit = pred(utf8_next(s, i));
    if (hit) {
      if (runs && prev) {
        out.back().second = i;
      } else {
        out.emplace_back(b, i);
      }
    }
    prev = hit;
  }
  return out;
}

template <typename F>
void for_each_piece(std::vector<NormalizedText>& pieces, F split_one) {
  std::vector<NormalizedText> out;
  out.reserve(pieces.size());
  for (NormalizedText& p : pieces) split_one(p, out);
  pieces = std::move(out);
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(SplitPattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(std::vector<NormalizedText>& pieces, bool) const override {
    for_each_piece(pieces, [&](NormalizedText& p, std::vector<NormalizedText>& out) {
      split_by_matches(p, pattern_.find_all(p.text()), behavior_, invert_, out);
    });
  }

 private:
  SplitPattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        regex_(use_regex ? std::make_unique<Regex>(kGpt2SplitPattern) : nullptr) {}
  void split(std::vector<NormalizedText>& pieces, bool) const override {
    for_each_piece(pieces, [&](NormalizedText& p, std::vector<NormalizedText>& out) {
      if (add_prefix_space_ && !p.text().starts_with(' ')) p.prepend(" ");
      if (regex_) {
        split_by_matches(p, regex_->find_all(p.text()), SplitBehavior::Isolated, false, out);
      } else {
        out.push_back(std::move(p));
      }
    });
  }
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class CharClassPreTokenizer : public PreTokenizer {
 public:
  CharClassPreTokenizer(std::function<bool(char32_t)> pred, bool runs, SplitBehavior behavior)
      : pred_(std::move(pred)), runs_(runs), behavior_(behavior) {}
  void split(std::vector<NormalizedText>& pieces, bool) const override {
    for_each_piece(pieces, [&](NormalizedText& p, std::vector<NormalizedText>& out) {
      split_by_matches(p, char_matches(p.text(), pred_, runs_), behavior_, false, out);
    });
  }

 private:
  std::function<bool(char32_t)> pred_;
  bool runs_;
  SplitBehavior behavior_;
};

// Keeps only the matches of a regex (Whitespace: \w+|[^\w\s]+).
class KeepMatchesPreTokenizer : public PreTokenizer {
 public:
  explicit KeepMatchesPreTokenizer(const std::string& pattern) : regex_(pattern) {}
  void split(std::vector<NormalizedText>& pieces, bool) const override {
    for_each_piece(pieces, [&](NormalizedText& p, std::vector<NormalizedText>& out) {
      split_by_matches(p, regex_.find_all(p.text()), SplitBehavior::Removed, true, out);
    });
  }

 private:
  Regex regex_;
};

class BertPreTokenizer : public PreTokenizer {
 public:
  void split(std::vector<NormalizedText>& pieces, bool) const override {
    for_each_piece(pieces, [&](NormalizedText& p, std::vector<NormalizedText>& out) {
      std::vector<NormalizedText> words;
      split_by_matches(p, char_matches(p.text(), unicode::is_whitespace, true),
                       SplitBehavior::Removed, false, words);
      for (const NormalizedText& w : words) {
        split_by_matches(w, char_matches(w.text(), unicode::is_bert_punctuation, false),
                         SplitBehavior::Isolated, false, out);
      }
    });
  }
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  enum class Prepend { Always, First, Never };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void split(std::vector<NormalizedText>& pieces, bool at_text_start) const override {
    for_each_piece(pieces, [&](NormalizedText& p, std::vector<NormalizedText>& out) {
      p.replace_all(" ", replacement_);
      const bool add = prepend_ == Prepend::Always || (prepend_ == Prepend::First && at_text_start);
      if (add && !p.text().starts_with(replacement_)) p.prepend(replacement_);
      if (split_) {
        split_by_matches(p, SplitPattern::literal(replacement_).find_all(p.text()),
                         SplitBehavior::MergedWithNext, false, out);
      } else {
        out.push_back(std::move(p));
      }
    });
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void split(std::vector<NormalizedText>& pieces, bool at_text_start) const override {
    for (const auto& p : parts_) p->split(pieces, at_text_start);
  }
  bool byte_level() const override {
    for (const auto& p : parts_) {
      if (p->byte_level()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

SplitBehavior behavior_from(const json& j, SplitBehavior fallback) {
  auto it = j.find("behavior");
  if (it == j.end() || !it->is_string()) return fallback;
  const std::string b = it->get<std::string>();
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  throw Error(ErrorCode::Format, "pre_tokenizer: unknown split behavior '" + b + "'");
}

bool get_bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, use_regex);
}

std::unique_ptr<PreTokenizer> make_bert_pre_tokenizer() {
  return std::make_unique<BertPreTokenizer>();
}

std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw Error(ErrorCode::Format, "pre_tokenizer: missing 'type'");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") {
    return make_byte_level_pre_tokenizer(get_bool(j, "add_prefix_space", true),
                                         get_bool(j, "use_regex", true));
  }
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(
        SplitPattern::from_json(j.value("pattern", json()), "pre_tokenizer Split"),
        behavior_from(j, SplitBehavior::Isolated), get_bool(j, "invert", false));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const json& p : j.value("pretokenizers", json::array())) {
      if (auto t = pre_tokenizer_from_json(p)) parts.push_back(std::move(t));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Digits") {
    return std::make_unique<CharClassPreTokenizer>(
        unicode::is_numeric, !get_bool(j, "individual_digits", false), SplitBehavior::Isolated);
  }
  if (type == "Whitespace") return std::make_unique<KeepMatchesPreTokenizer>(R"(\w+|[^\w\s]+)");
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharClassPreTokenizer>(unicode::is_whitespace, true,
                                                   SplitBehavior::Removed);
  }
  if (type == "BertPreTokenizer") return make_bert_pre_tokenizer();
  if (type == "Punctuation") {
    return std::make_unique<CharClassPreTokenizer>(unicode::is_bert_punctuation, false,
                                                   behavior_from(j, SplitBehavior::Isolated));
  }
  if (type == "Metaspace") {
    auto prepend = MetaspacePreTokenizer::Prepend::Always;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      const std::string s = j["prepend_scheme"].get<std::string>();
      prepend = s == "first"   ? MetaspacePreTokenizer::Prepend::First
                : s == "never" ? MetaspacePreTokenizer::Prepend::Never
                               : MetaspacePreTokenizer::Prepend::Always;
    } else if (!get_bool(j, "add_prefix_space", true)) {
      prepend = MetaspacePreTokenizer::Prepend::Never;
    }
    return std::make_unique<MetaspacePreTokenizer>(j.value("replacement", std::string("\u2581")),
                                                   prepend, get_bool(j, "split", true));
  }
  throw Error(ErrorCode::Unsupported, "pre_tokenizer type '" + type + "' is not supported");
}

}  // namespace attn::models
