#include "models/tokenizers/normalizer.h"

#include <vector>

#include "compute/error.h"
#include "models/tokenizers/split_pattern.h"
#include "models/tokenizers/unicode.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {
namespace {

using nlohmann::json;
using unicode::NormForm;

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormForm form) : form_(form) {}
  void normalize(NormalizedText& t) const override {
    if (form_ == NormForm::NFD || form_ == NormForm::NFKD) {
      // Decomposition maps each character on its own (reordering of marks aside).
      t.map_chars([&](char32_t c, std::u32string& out) {
        std::string s;
        utf8_append(s, c);
        const std::string n = c < 0x80 ? s : unicode::normalize(s, form_);
        size_t i = 0;
        while (i < n.size()) out += utf8_next(n, i);
      });
    } else {
      t.map_runs([&](char32_t c) { return unicode::has_boundary_before(c, form_); },
                 [&](const std::string& run) { return unicode::normalize(run, form_); });
    }
  }

 private:
  NormForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void normalize(NormalizedText& t) const override {
    t.map_chars([](char32_t c, std::u32string& out) { out += unicode::to_lower(c); });
  }
};

// NFD then drop marks: `nonspacing_only` drops Mn (BERT), otherwise every M* (StripAccents).
class StripAccentsNormalizer : public Normalizer {
 public:
  explicit StripAccentsNormalizer(bool nonspacing_only) : nonspacing_only_(nonspacing_only) {}
  void normalize(NormalizedText& t) const override {
    UnicodeNormalizer(NormForm::NFD).normalize(t);
    t.map_chars([&](char32_t c, std::u32string& out) {
      const bool drop = nonspacing_only_ ? unicode::is_nonspacing_mark(c) : unicode::is_mark(c);
      if (!drop) out += c;
    });
  }

 private:
  bool nonspacing_only_;
};

class BertNormalizer : public Normalizer {
 public:
  explicit BertNormalizer(const BertNormalizerOptions& o) : o_(o) {}
  void normalize(NormalizedText& t) const override {
    if (o_.clean_text) {
      t.map_chars([](char32_t c, std::u32string& out) {
        if (c == 0 || c == 0xFFFD || unicode::is_bert_control(c)) return;
        out += unicode::is_bert_whitespace(c) ? U' ' : c;
      });
    }
    if (o_.handle_chinese_chars) {
      t.map_chars([](char32_t c, std::u32string& out) {
        if (unicode::is_cjk_ideograph(c)) {
          out += U' ';
          out += c;
          out += U' ';
        } else {
          out += c;
        }
      });
    }
    if (o_.strip_accents.value_or(o_.lowercase)) StripAccentsNormalizer(true).normalize(t);
    if (o_.lowercase) LowercaseNormalizer().normalize(t);
  }

 private:
  BertNormalizerOptions o_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string s) : s_(std::move(s)) {}
  void normalize(NormalizedText& t) const override {
    if (!t.empty()) t.prepend(s_);
  }

 private:
  std::string s_;
};

// Replace with a literal or a regex pattern.
class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(SplitPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(NormalizedText& t) const override {
    t.replace_ranges(pattern_.find_all(t.text()), content_);
  }

 private:
  SplitPattern pattern_;
  std::string content_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(NormalizedText& t) const override { t.strip(left_, right_); }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  void normalize(NormalizedText& t) const override {
    for (const auto& p : parts_) p->normalize(t);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

bool get_bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

std::unique_ptr<Normalizer> make_bert_normalizer(const BertNormalizerOptions& options) {
  return std::make_unique<BertNormalizer>(options);
}

std::unique_ptr<Normalizer> normalizer_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw Error(ErrorCode::Format, "normalizer: missing 'type'");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormForm::NFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>(false);
  if (type == "BertNormalizer") {
    BertNormalizerOptions o;
    o.clean_text = get_bool(j, "clean_text", true);
    o.handle_chinese_chars = get_bool(j, "handle_chinese_chars", true);
    o.lowercase = get_bool(j, "lowercase", true);
    if (j.contains("strip_accents") && j["strip_accents"].is_boolean()) {
      o.strip_accents = j["strip_accents"].get<bool>();
    }
    return make_bert_normalizer(o);
  }
  if (type == "Prepend") {
    return std::make_unique<PrependNormalizer>(j.value("prepend", std::string()));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(
        SplitPattern::from_json(j.value("pattern", json()), "normalizer Replace"),
        j.value("content", std::string()));
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(get_bool(j, "strip_left", true),
                                             get_bool(j, "strip_right", true));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const json& p : j.value("normalizers", json::array())) {
      if (auto n = normalizer_from_json(p)) parts.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  throw Error(ErrorCode::Unsupported, "normalizer type '" + type + "' is not supported");
}

}  // namespace attn::models
