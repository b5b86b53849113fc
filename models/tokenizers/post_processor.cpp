#include "models/tokenizers/post_processor.h"

#include "compute/error.h"

namespace attn::models {
namespace {

using nlohmann::json;

class WrapPostProcessor : public PostProcessor {
 public:
  WrapPostProcessor(std::vector<Token> prefix, std::vector<Token> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void process(std::vector<Token>& tokens, size_t text_size) const override {
    tokens.insert(tokens.begin(), prefix_.begin(), prefix_.end());
    for (Token t : suffix_) {
      t.begin = t.end = text_size;
      tokens.push_back(t);
    }
  }
  std::vector<Token> prefix() const override { return prefix_; }
  std::vector<Token> suffix() const override { return suffix_; }

 private:
  std::vector<Token> prefix_, suffix_;
};

Token special(const std::string& piece, int32_t id) {
  Token t;
  t.id = id;
  t.piece = piece;
  t.special = true;
  return t;
}

// ["[CLS]", 101] as used by BertProcessing and RobertaProcessing.
Token pair_token(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() ||
      !(*it)[1].is_number_integer()) {
    throw Error(ErrorCode::Format,
                std::string("post_processor: '") + key + "' must be [token, id]");
  }
  return special((*it)[0].get<std::string>(), (*it)[1].get<int32_t>());
}

std::unique_ptr<PostProcessor> template_from_json(const json& j) {
  const json single = j.value("single", json::array());
  const json specials = j.value("special_tokens", json::object());
  std::vector<Token> prefix, suffix;
  bool seen_sequence = false;
  for (const json& item : single) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) continue;
    const std::string name = item["SpecialToken"].value("id", std::string());
    auto st = specials.find(name);
    if (st == specials.end() || !st->contains("ids") || !(*st)["ids"].is_array()) {
      throw Error(ErrorCode::Format, "post_processor TemplateProcessing: special token '" + name +
                                         "' is not listed in special_tokens");
    }
    const json& ids = (*st)["ids"];
    const json tokens = st->value("tokens", json::array());
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::string piece =
          k < tokens.size() && tokens[k].is_string() ? tokens[k].get<std::string>() : name;
      (seen_sequence ? suffix : prefix).push_back(special(piece, ids[k].get<int32_t>()));
    }
  }
  return make_wrap_post_processor(std::move(prefix), std::move(suffix));
}

class SequencePostProcessor : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void process(std::vector<Token>& tokens, size_t text_size) const override {
    for (const auto& p : parts_) p->process(tokens, text_size);
  }
  std::vector<Token> prefix() const override {
    std::vector<Token> out;
    for (auto it = parts_.rbegin(); it != parts_.rend(); ++it) {
      auto p = (*it)->prefix();
      out.insert(out.end(), p.begin(), p.end());
    }
    return out;
  }
  std::vector<Token> suffix() const override {
    std::vector<Token> out;
    for (const auto& p : parts_) {
      auto s = p->suffix();
      out.insert(out.end(), s.begin(), s.end());
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_wrap_post_processor(std::vector<Token> prefix,
                                                        std::vector<Token> suffix) {
  return std::make_unique<WrapPostProcessor>(std::move(prefix), std::move(suffix));
}

std::unique_ptr<PostProcessor> post_processor_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw Error(ErrorCode::Format, "post_processor: missing 'type'");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return nullptr;  // only trims offsets; adds no token
  if (type == "TemplateProcessing") return template_from_json(j);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return make_wrap_post_processor({pair_token(j, "cls")}, {pair_token(j, "sep")});
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const json& p : j.value("processors", json::array())) {
      if (auto pp = post_processor_from_json(p)) parts.push_back(std::move(pp));
    }
    return std::make_unique<SequencePostProcessor>(std::move(parts));
  }
  throw Error(ErrorCode::Unsupported, "post_processor type '" + type + "' is not supported");
}

}  // namespace attn::models
